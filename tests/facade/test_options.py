"""ReadOptions and MultiprocessingOptions: Grain's fields and order, checked values, warnings."""

from __future__ import annotations

import dataclasses
import logging

import pytest

import grainfn as grain


def test_read_options_warn_when_the_buffer_is_smaller_than_the_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="grainfn"):
        grain.ReadOptions(num_threads=8, prefetch_buffer_size=4)
        grain.ReadOptions(num_threads=8, prefetch_buffer_size=0)  # read-ahead off: no warning
        grain.ReadOptions(num_threads=4, prefetch_buffer_size=4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "grainfn"]
    assert len(warnings) == 1
    assert "prefetch_buffer_size=4 is below num_threads=8" in warnings[0]


def test_multiprocessing_options_are_still_built_positionally_as_grain_does() -> None:
    options = grain.MultiprocessingOptions(4, 2, True)  # Grain's three fields, in its order
    assert (options.num_workers, options.per_worker_buffer_size) == (4, 2)
    assert options.enable_profiling is True
    assert options.worker_timeout is None  # the default: wait as long as the worker lives
    names = [field.name for field in dataclasses.fields(grain.MultiprocessingOptions)]
    grains = ["num_workers", "per_worker_buffer_size", "enable_profiling"]
    assert names == [*grains, "worker_timeout", "adaptive"]  # grainfn's after Grain's
    assert grain.MultiprocessingOptions(4, 2, True, 9.5).worker_timeout == 9.5
    assert grain.MultiprocessingOptions() == grain.MultiprocessingOptions(0, 1, False, None, True)
