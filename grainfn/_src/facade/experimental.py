"""The names of Grain's `experimental` module that grainfn's core supports.

Grain exposes some stages as classes to construct rather than methods; here
each class builds the same core value its method would and wraps it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.facade.datasets import IterDataset, MapDataset, iter_core, map_core
from grainfn._src.index.rng import rewind
from grainfn._src.index.shuffle import permute_index
from grainfn._src.testing.assertions import assert_iterator_restores, assert_resumable
from grainfn._src.transforms import FlatMap

T = TypeVar("T")

_CHECKPOINT_ELEMENTS = 1000


class LimitIterDataset(IterDataset[T]):
    """The first `count` elements of `parent`.

    Examples:
        >>> import grainfn as grain
        >>> list(LimitIterDataset(grain.MapDataset.range(9).to_iter_dataset(), count=3))
        [0, 1, 2]
    """

    def __init__(self, parent: IterDataset[T], count: int) -> None:
        super().__init__(parent)
        self._core = fn.limit(count, iter_core(parent, "LimitIterDataset"))


class ThreadPrefetchIterDataset(IterDataset[T]):
    """`parent` read ahead by a background thread into a queue of `prefetch_buffer_size`.

    The elements and the states are `parent`'s own (a state restores with or
    without it); 0 turns read-ahead off.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(5).to_iter_dataset().map(lambda x: x + 1)
        >>> list(ThreadPrefetchIterDataset(ds, prefetch_buffer_size=2))
        [1, 2, 3, 4, 5]
    """

    def __init__(self, parent: IterDataset[T], *, prefetch_buffer_size: int) -> None:
        super().__init__(parent)
        stream = iter_core(parent, "ThreadPrefetchIterDataset")
        self._core = fn.thread_prefetch(prefetch_buffer_size, stream)


class CacheIterDataset(IterDataset[T]):
    """`parent`'s elements kept in memory once read, so a repeat or a restore reads them again.

    The elements and states are `parent`'s own (`fn.cache`).

    Examples:
        >>> import grainfn as grain
        >>> ds = CacheIterDataset(grain.MapDataset.range(3).to_iter_dataset())
        >>> list(RepeatIterDataset(ds, num_epochs=2))
        [0, 1, 2, 0, 1, 2]
    """

    def __init__(self, parent: IterDataset[T]) -> None:
        super().__init__(parent)
        self._core = fn.cache(iter_core(parent, "CacheIterDataset"))


class RepeatIterDataset(IterDataset[T]):
    """`parent` again from its start, `num_epochs` times or forever (None).

    Examples:
        >>> import grainfn as grain
        >>> list(RepeatIterDataset(grain.MapDataset.range(2).to_iter_dataset(), num_epochs=2))
        [0, 1, 0, 1]
    """

    def __init__(self, parent: IterDataset[T], num_epochs: int | None = None) -> None:
        super().__init__(parent)
        self._core = fn.repeat(num_epochs, iter_core(parent, "RepeatIterDataset"))


class FlatMapMapDataset(MapDataset[Any]):
    """`transform.max_fan_out` positions per element of `parent`, holding its parts.

    Examples:
        >>> import grainfn as grain
        >>> class Twice(grain.transforms.FlatMap):
        ...     max_fan_out = 2
        ...     def flat_map(self, x):
        ...         return [x, x]
        >>> list(FlatMapMapDataset(grain.MapDataset.range(2), Twice()))
        [0, 0, 1, 1]
    """

    def __init__(self, parent: MapDataset[Any], transform: FlatMap) -> None:
        super().__init__(parent)
        transform = _flat_map(transform)
        self._core = fn.flat_map(
            transform.flat_map,
            map_core(parent, type(self).__name__),
            max_fan_out=transform.max_fan_out,
        )


class FlatMapIterDataset(IterDataset[Any]):
    """Every part of `transform.flat_map(element)` for every element of `parent`."""

    def __init__(self, parent: IterDataset[Any], transform: FlatMap) -> None:
        super().__init__(parent)
        self._core = fn.flat_map(_flat_map(transform).flat_map, iter_core(parent, "FlatMap"))


class WindowShuffleMapDataset(MapDataset[T]):
    """A new permutation inside each window of `window_size` positions (`fn.window_shuffle`).

    Examples:
        >>> import grainfn as grain
        >>> ds = WindowShuffleMapDataset(grain.MapDataset.range(6), window_size=3, seed=0)
        >>> sorted(ds[:3]), sorted(ds[3:])
        ([0, 1, 2], [3, 4, 5])
    """

    def __init__(self, parent: MapDataset[T], *, window_size: int, seed: int) -> None:
        super().__init__(parent)
        self._core = fn.window_shuffle(
            window_size, map_core(parent, type(self).__name__), seed=seed
        )


class RngPool:
    """Philox generators keyed by `seed`, handed out at the start of any element's draws.

    `acquire_rng(index, op_seed=s)` gives the generator `random_map` hands to
    element `index` of a stage seeded `s` (the same draws as Grain's); give it
    back with `release_rng` to reuse it.

    Examples:
        >>> pool = RngPool(seed=4)
        >>> rng = pool.acquire_rng(7)
        >>> first = rng.integers(1000)
        >>> pool.release_rng(rng)
        >>> bool(pool.acquire_rng(7).integers(1000) == first)
        True
    """

    def __init__(self, seed: int) -> None:
        self._seed = validate.check_nonnegative_int(seed, "seed")
        self._free: list[np.random.Generator] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return (RngPool, (self._seed,))

    def acquire_rng(self, index: int, *, op_seed: int = 0) -> np.random.Generator:
        """A generator at the start of element `index`'s draws for the stage `op_seed`."""
        with self._lock:
            rng = self._free.pop() if self._free else None
        if rng is None:
            rng = np.random.Generator(np.random.Philox(self._seed))
        rewind(rng, validate.check_nonnegative_int(index, "index"), op_seed)
        return rng

    def release_rng(self, rng: np.random.Generator) -> None:
        """Gives a generator back for the next `acquire_rng`."""
        with self._lock:
            self._free.append(rng)


def index_shuffle(index: int, max_index: int, seed: int, rounds: int = 4) -> int:
    """The position of `index` in a keyed permutation of `[0, max_index]`, as Grain's.

    `rounds=4` is the permutation of one epoch of `MapDataset.shuffle`; any
    even number of rounds from 4 to 1024 gives Grain's permutation for it
    (`permute_index`).

    Examples:
        >>> sorted(index_shuffle(i, max_index=4, seed=7) for i in range(5))
        [0, 1, 2, 3, 4]
        >>> [index_shuffle(i, max_index=8, seed=33, rounds=6) for i in range(9)]
        [7, 5, 4, 1, 3, 6, 0, 8, 2]
    """
    return permute_index(index, max_index, seed, rounds)


def assert_equal_output_after_checkpoint(ds: Iterable[Any]) -> None:
    """Asserts that restoring the state saved before any element gives the same rest.

    Reads up to 1000 elements. A dataset built with grainfn's methods is
    checked on its core pipeline: each state goes through JSON into a fresh
    iterator (`assert_resumable`). Anything else whose iterator has
    `get_state` and `set_state` (a DataLoader, an ElasticIterator, an
    IterDataset subclass with its own iterator, ...) gets Grain's checks
    (`assert_iterator_restores`): the state keeps its structure, and an
    iterator set to any state gives it back and yields the same rest.

    Examples:
        >>> import grainfn as grain
        >>> assert_equal_output_after_checkpoint(grain.MapDataset.range(5).shuffle(seed=1))
        >>> ds = grain.MapDataset.range(12).shuffle(seed=1)
        >>> elastic = grain.experimental.ElasticIterator(ds, 4, grain.sharding.NoSharding())
        >>> assert_equal_output_after_checkpoint(elastic)
    """
    if isinstance(ds, MapDataset):
        ds = ds.to_iter_dataset()
    if not isinstance(ds, IterDataset) or getattr(ds, "_core", None) is None:
        assert_iterator_restores(ds, max_elements=_CHECKPOINT_ELEMENTS)
        return
    core = iter_core(ds, "assert_equal_output_after_checkpoint")
    assert_resumable(
        lambda: core,
        max_elements=_CHECKPOINT_ELEMENTS,
        resume_points=_CHECKPOINT_ELEMENTS + 1,
    )


def _flat_map(transform: Any) -> FlatMap:
    if not isinstance(transform, FlatMap):
        raise TypeError(
            f"A FlatMap transformation (with max_fan_out and flat_map) is expected, got "
            f"{transform!r}."
        )
    return transform
