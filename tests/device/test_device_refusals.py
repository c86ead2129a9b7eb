"""The device path says what is wrong, never ends or grows silently (issue 46, point 5)."""

from __future__ import annotations

import itertools
from typing import Any

import jax
import numpy as np
import pytest

from grainfn import UserStopIterationError, fn


def stops(x: Any) -> Any:
    raise StopIteration


def test_a_stop_iteration_in_a_to_jax_map_is_an_error_not_the_end() -> None:
    jds = fn.to_jax(fn.map(stops, fn.range(10)))

    def batches() -> Any:  # a user's generator over `step`: StopIteration would end it
        state = jds.init()
        while True:
            batch, state = jax.jit(fn.JaxDataset.step)(jds, state)
            yield batch

    with pytest.raises(UserStopIterationError, match=r"map\(stops\) raised StopIteration"):
        list(itertools.islice(batches(), 3))
    with pytest.raises(UserStopIterationError, match="while to_jax traced it"):
        jds.get(0)


def test_a_saved_epoch_past_32_bits_is_refused_not_wrapped() -> None:
    jds = fn.to_jax(fn.range(10))
    saved = fn.EpochPosition(np.int64(2**32 + 5), np.int64(3))  # from a 64-bit run
    with pytest.raises(OverflowError, match=r"epoch 4294967301 does not fit int32"):
        jds.step(saved)
    with pytest.raises(OverflowError, match="jax_enable_x64"):
        jds.steps(saved, 2)
    assert int(jds.step(fn.EpochPosition(np.int64(5), np.int64(3)))[0]) == 3  # fits: taken


def test_put_on_device_refuses_an_ahead_it_would_read_forever_to_fill() -> None:
    endless = fn.from_dataset(fn.repeat(None, fn.range(3)))
    with pytest.raises(ValueError, match=r"ahead is 1000000000: .* at most 1024"):
        fn.put_on_device(jax.devices()[0], endless, ahead=10**9)
    it = fn.iterate(fn.put_on_device(jax.devices()[0], endless, ahead=1024))
    assert int(next(it)) == 0  # the most it takes: 1025 elements read, then the first
    it.close()


def build(scale: float) -> Any:
    """A pipeline built the usual way: a fresh lambda at each call."""
    return fn.to_jax(fn.map(lambda x: x * scale + 1, fn.shuffle(fn.range(64), seed=0)))


def test_a_pipeline_rebuilt_with_a_fresh_lambda_reuses_its_program() -> None:
    step = jax.jit(fn.JaxDataset.step)
    first = build(2)
    step(first, first.init())
    size = step._cache_size()
    for _ in range(60):
        again = build(2)
        element, _ = step(again, again.init())
    assert step._cache_size() == size, "each rebuild compiled and kept a program of its own"
    assert float(element) == float(first.get(0))
    other = build(3)  # the lambda closes over another value: another program
    assert float(step(other, other.init())[0]) == fn.shuffle(fn.range(64), seed=0).get(0) * 3 + 1


def test_a_lambda_closing_over_an_array_keeps_its_own_program() -> None:
    def with_table(table: np.ndarray) -> Any:
        return fn.to_jax(fn.map(lambda x: x + table[0], fn.range(4)))

    step = jax.jit(fn.JaxDataset.step)
    one, two = with_table(np.array([10])), with_table(np.array([20]))
    assert int(step(one, one.init())[0]) == 10 and int(step(two, two.init())[0]) == 20


def test_a_dict_source_with_a_single_value_says_each_array_needs_a_row_per_record() -> None:
    with pytest.raises(ValueError, match=r"got shapes \{'x': \(5,\), 'scale': \(\)\}"):
        fn.source({"x": np.arange(5), "scale": np.float32(3.0)})
    ds = fn.source({"x": np.arange(5, dtype=np.int32), "scale": np.full(5, np.float32(3.0))})
    assert float(fn.to_jax(ds).get(2)["scale"]) == 3.0
