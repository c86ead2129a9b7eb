"""Tests for grainfn._src.index.shuffle_jax: the shuffle on jax arrays equals numpy's."""

import numpy as np
import pytest

from grainfn._src.index.shuffle import shuffle_indices
from grainfn._src.index.shuffle_jax import permute_jax, shuffle_jax


@pytest.fixture
def x64():
    import jax

    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("length", [1, 2, 1000, 65537, 10**6 + 3, 2**31])
def test_jax_32_bit_matches_numpy(length: int) -> None:
    import jax

    assert not jax.config.read("jax_enable_x64")
    indices = np.arange(0, min(3 * length, 2**31 - 1), max(1, 3 * length // 3000))
    expected = shuffle_indices(indices, length, 77)
    traced = jax.jit(lambda x: shuffle_indices(x, length, 77))(jax.numpy.asarray(indices))
    assert traced.dtype == np.int32
    assert np.array_equal(np.asarray(traced), expected)
    eager = shuffle_indices(jax.numpy.asarray(indices), length, 77)
    assert np.array_equal(np.asarray(eager), expected)


def test_jax_32_bit_rejects_lengths_needing_x64() -> None:
    import jax

    with pytest.raises(ValueError, match="jax_enable_x64"):
        shuffle_indices(jax.numpy.arange(3), 2**32 + 1, 0)
    with pytest.raises(ValueError, match="got -1"):
        shuffle_indices(jax.numpy.array([0, -1]), 10, 0)


@pytest.mark.parametrize("length", [1000, 2**33 + 5, 2**62 + 12345, 2**63 - 1])
def test_jax_x64_matches_numpy(x64, length: int) -> None:
    jax = x64
    indices = np.arange(0, 2000) * (2 * length // 2000 if length < 2**62 else length // 2000)
    expected = shuffle_indices(indices, length, 2**32 - 1)
    traced = jax.jit(lambda x: shuffle_indices(x, length, 2**32 - 1))(jax.numpy.asarray(indices))
    assert traced.dtype == np.int64
    assert np.array_equal(np.asarray(traced), expected)


def test_permute_jax_is_one_epoch_of_the_shuffle_for_scalars_under_vmap() -> None:
    import jax
    import jax.numpy as jnp

    length, seed = 1000, 9
    offsets = jnp.arange(length, dtype=jnp.uint32)
    permuted = jax.vmap(lambda o: permute_jax(o, length, np.uint32(seed)))(offsets)
    assert permuted.dtype == np.uint32
    expected = shuffle_indices(np.arange(length), length, seed).tolist()
    assert np.asarray(permuted).tolist() == expected  # vmap hands it one scalar offset each


def test_permute_jax_takes_one_seed_per_offset() -> None:
    import jax.numpy as jnp

    length = 300
    offsets = jnp.asarray([5, 5, 5], dtype=jnp.uint32)
    seeds = jnp.asarray([0, 1, 2], dtype=jnp.uint32)
    got = np.asarray(permute_jax(offsets, length, seeds)).tolist()
    # Epoch e of a shuffle with seed 0 is its permutation with seed e.
    expected = shuffle_indices(np.array([5, 305, 605]), length, 0) - np.array([0, 300, 600])
    assert got == expected.tolist()


def test_permute_jax_of_length_one_is_zero_and_clamps_offsets_out_of_range() -> None:
    import jax.numpy as jnp

    assert np.asarray(permute_jax(jnp.asarray([0, 3], jnp.uint32), 1, 4)).tolist() == [0, 0]
    clamped = permute_jax(jnp.asarray([10**6], jnp.uint32), 100, 4)  # read as offset 99
    assert np.asarray(clamped).tolist() == shuffle_indices(np.array([99]), 100, 4).tolist()


def test_shuffle_jax_names_bad_dtypes_and_lengths() -> None:
    import jax.numpy as jnp

    with pytest.raises(TypeError, match="indices must be integers, got dtype float32"):
        shuffle_jax(jnp.asarray([0.5], jnp.float32), 10, 0)
    with pytest.raises(ValueError, match="length 1000 does not fit in indices of dtype int8"):
        shuffle_jax(jnp.asarray([1], jnp.int8), 1000, 0)
