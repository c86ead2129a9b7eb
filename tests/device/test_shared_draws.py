"""random_map(..., rng="jax"): the same draws on the host, in host workers and on device."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grainfn import fn


def jitter(x: Any, key: Any) -> Any:
    """Module level: worker processes unpickle it by name."""
    return x * 1000 + jax.random.randint(key, (), 0, 1000, dtype=jnp.int32)


def augmented(length: int = 40) -> Any:
    noisy = fn.random_map(jitter, fn.shuffle(fn.range(length), seed=5), seed=11, rng="jax")
    return fn.batch(4, noisy, drop_remainder=True)


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_host_draws_equal_the_device_draws_in_any_epoch(x64: bool) -> None:
    ds = augmented()
    positions = [0, 3, 9, 10, 57, 10**6 + 3]  # 10 batches an epoch: later epochs too
    with jax.enable_x64(x64):
        device = jax.jit(fn.to_jax(ds).get_many)(jnp.asarray(positions))
    np.testing.assert_array_equal(np.asarray(device), np.stack(ds.get_many(positions)))


def test_endless_stage_draws_match_past_32_bits() -> None:
    ds = fn.random_map(jitter, fn.repeat(None, fn.range(7)), seed=3, rng="jax")
    jds = fn.to_jax(ds)
    state = jds.device_state(fn.DatasetPosition(2**32 - 2))
    _, state = jds.step(state)
    element, _ = jds.step(state)  # position 2**32 - 1, then 2**32 below
    assert int(element) == ds.get(2**32 - 1)
    assert int(jds.step(_)[0]) == ds.get(2**32)


@pytest.mark.slow
def test_a_run_stopped_on_device_goes_on_with_two_host_workers() -> None:
    ds = augmented()
    jds = fn.to_jax(ds)

    def body(state: Any, _: Any) -> Any:
        batch, state = jds.step(state)
        return state, batch

    state, first = jax.lax.scan(body, jds.init(), None, length=13)  # into epoch 1
    saved = fn.state_to_dict(jds, state)
    workers = fn.mp_prefetch(2, jds.stream)
    host = fn.iterate(workers, fn.state_from_dict(workers, saved))
    rest = [next(host) for _ in range(9)]
    _, device_rest = jax.lax.scan(body, state, None, length=9)
    np.testing.assert_array_equal(np.stack(rest), np.asarray(device_rest))
    # ... and the host's state goes back to the device.
    back = fn.state_from_dict(jds, fn.state_to_dict(workers, host.state))
    _, following = jax.lax.scan(body, back, None, length=2)
    np.testing.assert_array_equal(np.asarray(following), np.stack(ds.get_many([22, 23])))
    assert np.asarray(first).shape == (13, 4)


def test_streams_draw_by_count_with_jax_keys_too() -> None:
    stream = fn.random_map(jitter, fn.from_dataset(fn.range(5)), seed=2, rng="jax")
    by_position = fn.random_map(jitter, fn.range(5), seed=2, rng="jax").get_many(range(5))
    assert [int(x) for x in fn.iterate(stream)] == [int(x) for x in by_position]


def test_the_numpy_form_is_refused_on_device_naming_the_jax_form() -> None:
    numpy_form = fn.random_map(lambda x, rng: x + rng.integers(9), fn.range(5), seed=1)
    with pytest.raises(TypeError, match=r"takes a numpy Generator.*rng='jax'"):
        fn.to_jax(numpy_form)
    with pytest.raises(ValueError, match=r"rng must be one of \['numpy', 'jax'\].*got 'torch'"):
        fn.random_map(jitter, fn.range(5), seed=1, rng="torch")
    assert "rng=jax" in fn.random_map(jitter, fn.range(5), seed=1, rng="jax").describe_stage()
    assert "rng" not in numpy_form.describe_stage()  # Grain's form keeps its description
