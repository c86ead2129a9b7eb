"""Nothing endless: a worker_timeout poll() cannot take is refused when made.

A worker_timeout above what poll() takes passed its check, then failed with a raw
OverflowError at the first `next()`; each test failed before its fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import grainfn as grain
from grainfn import fn

from support.leaks import assert_nothing_left

LONGEST_TIMEOUT = 2147483
"""The longest worker_timeout, in seconds: (2**31 - 1) milliseconds, what poll() takes."""

TOO_LONG = [LONGEST_TIMEOUT + 1, 2147483.648, 9.2e9, 1e10, 1e300]
"""Past the longest wait poll() takes: each passed the check, then failed at the first `next()`
with a raw OverflowError ("timeout is too large", or "timestamp too large" from 9.3e9 on)."""


@pytest.mark.parametrize("seconds", TOO_LONG, ids=repr)
def test_a_worker_timeout_poll_cannot_take_is_refused_when_made(seconds: float) -> None:
    builders: dict[str, Callable[[], Any]] = {
        "worker_timeout": lambda: fn.mp_prefetch(2, fn.range(4), worker_timeout=seconds),
        "MultiprocessingOptions.worker_timeout": lambda: grain.MultiprocessingOptions(
            num_workers=2, worker_timeout=seconds
        ),
        "worker_timeout ": lambda: grain.DataLoader(
            data_source=[1, 2],
            sampler=grain.samplers.SequentialSampler(2),
            worker_count=2,
            worker_timeout=seconds,
        ),
    }
    for name, build in builders.items():
        with pytest.raises(ValueError) as refused:
            build()
        assert str(refused.value) == (
            f"{name.strip()} must be at most 2147483 seconds (about 24.8 days, the longest wait "
            f"poll() takes), got {seconds!r}. Pass None to wait for a worker as long as it lives."
        )


def times_ten(x: int) -> int:
    return x * 10


class TimesTen(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        return times_ten(element)


def test_the_longest_worker_timeout_is_taken_and_waited_with() -> None:
    options = grain.MultiprocessingOptions(num_workers=2, worker_timeout=LONGEST_TIMEOUT)
    assert options.worker_timeout == LONGEST_TIMEOUT
    # A worker_timeout pins the work to the workers: the parent waits on them with it.
    stream = fn.mp_prefetch(2, fn.map(times_ten, fn.range(20)), worker_timeout=LONGEST_TIMEOUT)
    assert list(fn.iterate(stream)) == [x * 10 for x in range(20)]
    loader = grain.DataLoader(
        data_source=list(range(20)),
        sampler=grain.samplers.SequentialSampler(20),
        operations=[TimesTen()],
        worker_count=2,
        worker_timeout=LONGEST_TIMEOUT,
    )
    assert list(loader) == [x * 10 for x in range(20)]
    assert_nothing_left()
