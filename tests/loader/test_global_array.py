"""Tests for grainfn._src.loader.global_array: one global jax.Array from each process's batch."""

import jax
import numpy as np

from grainfn._src.loader.global_array import make_global_array


def test_a_single_process_batch_becomes_global_arrays_of_the_same_rows() -> None:
    batch = {"image": np.arange(8.0).reshape(4, 2), "label": (np.arange(4), np.ones(4))}
    out = make_global_array(batch)
    assert set(out) == {"image", "label"}
    assert isinstance(out["image"], jax.Array)
    np.testing.assert_array_equal(out["image"], batch["image"])
    np.testing.assert_array_equal(out["label"][0], np.arange(4))
    assert isinstance(out["label"], tuple)
    assert out["image"].sharding.spec == jax.sharding.PartitionSpec("data")


def test_a_given_sharding_is_used_for_every_leaf() -> None:
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    out = make_global_array([np.arange(3), np.array([7, 8, 9])], sharding)
    assert [leaf.sharding for leaf in out] == [sharding, sharding]
    assert [leaf.tolist() for leaf in out] == [[0, 1, 2], [7, 8, 9]]
