"""An iterator that raised a user's error is freed as soon as it is dropped, workers and all.

A raised error holds its traceback, and the traceback holds the frames it
passed through. Where one of those frames, or an object one of them holds,
holds the error in turn (a local variable, a stored error, a future's
result), the iterator is in a reference cycle: only the garbage collector
frees it, at a time nobody chooses, and until then its worker processes and
threads run on. These tests turn the collector off, read up to a user's
error, drop everything and look for grainfn objects the collector would
have to free.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn


def fails_at_5(x: int) -> int:
    if x == 5:
        raise ValueError("no 5 here")
    return x


class FailsAt5(grain.transforms.Map):
    def map(self, element: int) -> int:
        return fails_at_5(element)


def as_int32(x: int) -> np.int32:
    return np.int32(fails_at_5(x))


TWO_WORKERS = grain.MultiprocessingOptions(num_workers=2)
FAILING = grain.MapDataset.range(20).map(fails_at_5)

ITERATORS: dict[str, Callable[[], Iterator[Any]]] = {
    "fn.iterate": lambda: fn.iterate(fn.map(fails_at_5, fn.from_dataset(fn.range(20)))),
    "IterDataset": lambda: iter(FAILING.to_iter_dataset()),
    "mp_prefetch": lambda: iter(FAILING.to_iter_dataset().mp_prefetch(TWO_WORKERS)),
    "thread prefetch": lambda: iter(
        grain.experimental.ThreadPrefetchIterDataset(
            FAILING.to_iter_dataset(), prefetch_buffer_size=4
        )
    ),
    "device_put": lambda: iter(
        grain.experimental.device_put(
            grain.MapDataset.range(20).map(as_int32).to_iter_dataset(), device=None
        )
    ),
    "DataLoader": lambda: iter(
        grain.DataLoader(
            data_source=list(range(20)),
            sampler=grain.SequentialSampler(20),
            operations=[FailsAt5()],
            worker_count=2,
        )
    ),
    "elastic_batches": lambda: fn.iterate(
        fn.elastic_batches(
            4, fn.map(fails_at_5, fn.from_dataset(fn.range(40))), num_logical_shards=2
        )
    ),
}


def read_until_the_error(make: Callable[[], Iterator[Any]]) -> None:
    iterator = make()
    with pytest.raises(ValueError, match="no 5 here"):
        for _ in range(40):
            next(iterator)


def left_for_the_collector(run: Callable[[], None]) -> list[str]:
    """The grainfn objects that `run` leaves in reference cycles, by type name."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return sorted(
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("grainfn")
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


@pytest.mark.slow
@pytest.mark.parametrize("face", ITERATORS)
def test_an_iterator_that_raised_is_freed_when_dropped(face: str) -> None:
    assert left_for_the_collector(lambda: read_until_the_error(ITERATORS[face])) == []


def test_the_check_sees_a_cycle() -> None:
    def cycle() -> None:
        iterator = fn.iterate(fn.range(3))
        iterator.itself = iterator  # type: ignore[attr-defined]

    assert "StreamIterator" in left_for_the_collector(cycle)
