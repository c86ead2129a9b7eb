"""Checks that a facade pipeline resumes exactly, by get_state and set_state and under workers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import grainfn as grain
from grainfn.testing import assert_elements_equal


def assert_get_state_resumes(
    make: Callable[[], Any], positions: Iterable[int] | None = None
) -> None:
    """After k elements, `get_state` through JSON into a fresh iterator gives the rest.

    Args:
        make: Builds the pipeline (an IterDataset or MapDataset) anew each call.
        positions: The k to check; every k from 0 to the end if None.
    """
    expected = list(make())
    for k in range(len(expected) + 1) if positions is None else positions:
        it = iter(make())
        head = [next(it) for _ in range(k)]
        saved = json.loads(json.dumps(it.get_state()))
        fresh = iter(make())
        fresh.set_state(saved)
        assert_elements_equal(head + list(fresh), expected)


def assert_same_under_workers(make: Callable[[], Any], workers: Iterable[int] = (0, 1, 2)) -> None:
    """`mp_prefetch` with each worker count yields what no workers yield, and its state
    saved midway restores without workers."""
    expected = list(make())
    assert expected
    for count in workers:
        it = iter(make().mp_prefetch(grain.MultiprocessingOptions(num_workers=count)))
        head = [next(it) for _ in range(len(expected) // 2)]
        saved = it.get_state()
        assert_elements_equal(head + list(it), expected)
        it.close()
        resumed = iter(make())
        resumed.set_state(saved)
        assert_elements_equal(list(resumed), expected[len(head) :])
