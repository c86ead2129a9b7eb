"""Device index math in both integer modes: exact where it fits, refused where it cannot be.

Also: states that went through jit are accepted by every host state API.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn

TOP32 = 2**31 - 1


def assert_device_equals_host(ds: Any, positions: list[int]) -> None:
    device = jax.jit(fn.to_jax(ds).get_many)(jnp.asarray(positions))
    host = ds.get_many(positions)
    np.testing.assert_array_equal(np.asarray(device), np.asarray(host))


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_the_overflow_cases_of_the_issue_are_exact(x64: bool) -> None:
    with jax.enable_x64(x64):
        big = fn.range(10**9)
        positions = [8_388_607, 8_388_608, 8_388_609, 33_554_432, 33_554_433, TOP32 - 1, TOP32]
        assert_device_equals_host(fn.mix([big, big, big], [0.7, 0.2, 0.1]), positions)
        assert_device_equals_host(fn.mix([big, big], [3, 1]), positions)
        second_epoch = [2**31 - 10, 2**31 - 9, TOP32]  # positions of the shuffle's epoch 1
        assert_device_equals_host(fn.shuffle(fn.range(2**31 - 10), seed=4), second_epoch)


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_batches_of_a_mix_reach_positions_past_32_bits_exactly(x64: bool) -> None:
    with jax.enable_x64(x64):
        mixed = fn.mix([fn.range(1000), fn.shuffle(fn.range(10**6, 10**6 + 500), seed=1)])
        ds = fn.batch(128, mixed, drop_remainder=True)
        assert_device_equals_host(ds, [0, 5, 10**6, 2**25 + 3, TOP32])  # element ~2**38


def test_what_32_bits_cannot_hold_is_refused_naming_x64() -> None:
    wide_values = fn.range(2**33, 2**33 + 10)
    with pytest.raises(OverflowError, match="jax_enable_x64"):
        fn.to_jax(wide_values)
    with pytest.raises(OverflowError, match="jax_enable_x64"):
        fn.to_jax(fn.shuffle(fn.range(2**33), seed=0))  # a 34-bit shuffle block
    with pytest.raises(OverflowError, match="position 2147483648 does not fit int32"):
        fn.to_jax(fn.range(5)).get_many(np.array([2**31]))
    with jax.enable_x64(True):
        assert_device_equals_host(wide_values, [0, 9, 2**40])
        assert_device_equals_host(fn.shuffle(fn.range(2**33), seed=0), [0, 2**33 + 5, 2**62])


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 2**31), min_size=1, max_size=3),
    weights=st.lists(st.floats(0.1, 5.0), min_size=3, max_size=3),
    positions=st.lists(st.integers(0, TOP32), min_size=1, max_size=8),
    batch=st.integers(1, 300),
)
def test_random_mixes_under_batches_are_exact_in_32_bits(
    lengths: list[int], weights: list[float], positions: list[int], batch: int
) -> None:
    components = [fn.shuffle(fn.range(n), seed=n % 7) for n in lengths]
    mixed = fn.mix(components, weights[: len(lengths)])
    ds = fn.batch(batch, mixed, drop_remainder=True)
    if ds.length == 0:
        return
    assert_device_equals_host(ds, [p % ds.length + (p // ds.length) * ds.length for p in positions])


def test_states_out_of_jit_work_with_every_host_state_api() -> None:
    infinite = fn.from_dataset(fn.repeat(None, fn.shuffle(fn.range(10), seed=1)))
    state = jax.jit(lambda s: s)(fn.DatasetPosition(jnp.int32(3)))  # int32 inside jit
    element, after = infinite.step(state)
    assert element == infinite.step(fn.DatasetPosition(3))[0]
    assert after == fn.DatasetPosition(4)
    assert next(fn.iterate(infinite, state)) == element
    assert fn.state_to_dict(infinite, state)["state"] == {"kind": "DatasetPosition", "position": 3}
    streams = [fn.from_dataset(fn.range(3)), fn.from_dataset(fn.range(3))]
    mixed = fn.mix(streams)
    jitted = jax.jit(lambda s: s)(mixed.init())  # a bool and int32 arrays
    assert fn.state_to_dict(mixed, jitted) == fn.state_to_dict(mixed, mixed.init())
    assert mixed.step(jitted) == mixed.step(mixed.init())
    mixed.check_state(jitted)  # the stream's own check takes it too
    with pytest.raises(ValueError, match="stopped must be a bool"):
        fn.state_to_dict(mixed, mixed.init()._replace(stopped=np.array([True, False])))


@functools.partial(jax.jit, static_argnums=2)
def scan(jds: Any, state: Any, steps: int) -> Any:
    def body(state: Any, _: Any) -> Any:
        element, state = jds.step(state)
        return state, element

    return jax.lax.scan(body, state, None, length=steps)


def scan_from(ds: Any, start: int, steps: int) -> None:
    """A jitted scan of `step` from host position `start` equals the host, states included."""
    jds = fn.to_jax(ds)  # the same dataset again: the compiled scan is reused
    after, elements = scan(jds, jds.device_state(fn.DatasetPosition(start)), steps)
    host = ds.get_many(list(range(start, start + steps)))
    np.testing.assert_array_equal(np.asarray(elements), np.asarray(host))
    assert jds.host_state(after) == fn.DatasetPosition(start + steps)
    iterator = fn.iterate(jds, jds.device_state(fn.DatasetPosition(start)))
    np.testing.assert_array_equal(np.asarray([next(iterator) for _ in range(steps)]), host)
    assert fn.state_to_dict(jds, iterator.state) == fn.state_to_dict(jds, after)


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("start", [2**31 - 3, 2**32 - 3])
def test_steps_across_2_to_the_31_and_32_are_exact(x64: bool, start: int) -> None:
    # The issue's scan: int32 positions wrapped to -2**31 past 2**31 - 1, and past
    # 2**32 steps the device read epoch 0 again.
    with jax.enable_x64(x64):
        scan_from(fn.shuffle(fn.range(1000), seed=2), start, 6)
        scan_from(fn.batch(4, fn.repeat(None, fn.shuffle(fn.range(10), seed=3))), start, 6)


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_an_endless_language_model_mix_runs_exactly_in_both_modes(x64: bool) -> None:
    corpora = [fn.shuffle(fn.range(n), seed=n) for n in (1000, 300, 70)]
    lm = fn.batch(8, fn.mix([fn.repeat(None, c) for c in corpora], [0.6, 0.3, 0.1]))
    with jax.enable_x64(x64):
        for start in (0, 2**31 - 2, 2**33 + 5, 2**40):
            scan_from(lm, start, 4)


def test_a_range_past_int32_is_exact_by_position_and_refused_by_step() -> None:
    jds = fn.to_jax(fn.range(2**31 + 5))
    np.testing.assert_array_equal(jds.get_many([0, TOP32]), [0, TOP32])
    with pytest.raises(OverflowError, match=r"step cannot be exact.*its values reach 2147483652"):
        jds.init()
    with pytest.raises(OverflowError, match="get_many is exact"):
        jds.step(fn.EpochPosition(0, 0))
    with jax.enable_x64(True):
        scan_from(fn.range(2**31 + 5), 2**31 - 2, 3)
        scan_from(fn.range(2**31 + 5), 2**31 + 4, 3)  # into epoch 1


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_wide_arithmetic_splits_by_lengths_past_32_bits(x64: bool) -> None:
    # A finite stage longer than 2**32: its offsets are pairs of words in 32-bit mode.
    long = fn.repeat(3000, fn.shuffle(fn.range(2_000_000), seed=5))  # 6e9 positions
    with jax.enable_x64(x64):
        assert_device_equals_host(fn.batch(2, long), [0, 2**31 - 1])
        scan_from(long, 6 * 10**9 - 2, 4)  # across the end of its epoch 0


def test_components_of_other_dtypes_are_refused_not_promoted() -> None:
    small = fn.source(np.arange(5, dtype=np.int8))
    wide_ints = fn.source(np.arange(5, dtype=np.int32))
    # The issue: an int8 element came out int32 on device only.
    with pytest.raises(TypeError, match=r"component 0: int8; component 1: int32.*astype"):
        fn.to_jax(fn.mix([small, wide_ints]))
    with pytest.raises(TypeError, match="different dtypes"):
        fn.to_jax(fn.concatenate([wide_ints, fn.source(np.arange(3, dtype=np.float32))]))
    same = fn.mix([small, fn.map(lambda x: x.astype(np.int8), wide_ints)])
    device = fn.to_jax(same).get_many(jnp.arange(6))
    assert device.dtype == np.int8
    np.testing.assert_array_equal(device, np.stack(same.get_many(range(6))))


def test_to_jax_of_an_equal_pipeline_reuses_the_compiled_program() -> None:
    def pipeline(seed: int = 2) -> Any:
        return fn.batch(4, fn.shuffle(fn.source(np.arange(40, dtype=np.float32)), seed=seed))

    step = jax.jit(lambda jds, state: jds.step(state))  # a cache of its own
    for _ in range(3):  # as a training loop that builds its pipeline again every epoch
        jds = fn.to_jax(pipeline())
        step(jds, jds.init())
    assert step._cache_size() == 1  # one trace and one program, not three
    step(fn.to_jax(pipeline(seed=3)), jds.init())
    step(fn.to_jax(fn.batch(4, fn.shuffle(fn.range(40), seed=2))), jds.init())
    assert step._cache_size() == 3  # another seed, another source: other programs


def test_a_jit_that_closes_over_large_arrays_warns_and_the_argument_form_does_not() -> None:
    images = np.zeros((5000, 1000), np.float32)  # 19 MiB: past the 16 MiB the warning allows
    jds = fn.to_jax(fn.batch(10, fn.source(images)))
    with pytest.warns(UserWarning, match=r"19 MiB of arrays are folded.*JaxDataset\.step\)\(jds"):
        jax.jit(jds.step)(jds.init())  # the arrays become constants of the program
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.jit(fn.JaxDataset.step)(jds, jds.init())  # they are arguments
        jds.get_many(jnp.arange(2))  # no trace to fold into
