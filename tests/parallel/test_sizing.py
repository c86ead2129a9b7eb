"""sizes_for_budget: workers and read-ahead from the size of a few elements, Grain's rule.

The same sizes as Grain's `pick_performance_config` for the same pipelines are
tested in tests/facade/test_prefetch_autotune.py.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.parallel.sizing import (
    DEFAULT_MAX_BUFFER,
    BudgetSizes,
    element_bytes,
    read_streams,
    sizes_for_budget,
)

MEGABYTE = fn.map(lambda x: np.full(1024 * 1024 // 8, x, np.float64), fn.range(40))


def test_an_element_counts_the_bytes_of_its_arrays_at_every_level() -> None:
    element = {"a": np.zeros(10, np.int32), "b": [np.zeros(3, np.uint8), (np.zeros(2),)]}
    assert element_bytes(element) == 40 + 3 + 16


def test_workers_and_buffer_are_what_the_budget_holds() -> None:
    stream = fn.from_dataset(MEGABYTE)
    assert sizes_for_budget(stream, 6, max_workers=8) == BudgetSizes(6, 6)
    assert sizes_for_budget(stream, 6, max_workers=2, max_buffer_size=3) == BudgetSizes(2, 3)


def test_the_buffer_is_shared_by_every_dataset_read() -> None:
    both = fn.mix([fn.from_dataset(MEGABYTE), fn.from_dataset(MEGABYTE)])
    assert len(read_streams(both)) == 2
    assert sizes_for_budget(both, 8, max_workers=16) == BudgetSizes(8, 4)


def test_a_dataset_sizes_its_workers_and_keeps_the_largest_buffer() -> None:
    assert sizes_for_budget(MEGABYTE, 5, max_workers=16) == BudgetSizes(5, DEFAULT_MAX_BUFFER)


def test_too_few_elements_to_measure_take_the_maxima(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="grainfn"):
        sizes = sizes_for_budget(fn.from_dataset(fn.range(3)), 1, max_workers=7)
    assert sizes == BudgetSizes(7, DEFAULT_MAX_BUFFER)
    assert "3 of 5 elements to measure" in caplog.text


def test_bad_arguments_are_refused_naming_them() -> None:
    stream = fn.from_dataset(fn.range(10))
    with pytest.raises(ValueError, match="ram_budget_mb must be a positive integer, got 0"):
        sizes_for_budget(stream, 0, max_workers=1)
    with pytest.raises(TypeError, match="max_workers must be an integer >= 0, got '3'"):
        sizes_for_budget(stream, 10, max_workers="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_buffer_size must be an integer >= 0, got -1"):
        sizes_for_budget(stream, 10, max_workers=1, max_buffer_size=-1)
    with pytest.raises(TypeError, match="takes a Stream or a Dataset, got \\[1, 2\\] of type list"):
        sizes_for_budget([1, 2], 10, max_workers=1)  # type: ignore[arg-type]
