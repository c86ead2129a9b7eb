"""Grain's experimental zip, interleave, window shuffle and rebatch stages, as facade classes.

Each class takes Grain's arguments, builds the core value with the
`grainfn.fn` combinator of the same name and wraps it, so it chains, iterates
and checkpoints like any other facade dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.facade.datasets import IterDataset, MapDataset, map_core, stream_core

T = TypeVar("T")


class ZipMapDataset(MapDataset[tuple[Any, ...]]):
    """Tuples of the i-th elements of MapDatasets of equal length, as in Grain.

    A None (filtered-out element) of a parent stays inside its tuple. Parents
    of different lengths are a ValueError; slice them to a common length
    first (or zip to the shortest with `grainfn.fn.zip`).

    Examples:
        >>> import grainfn as grain
        >>> ds = ZipMapDataset([grain.MapDataset.range(3), grain.MapDataset.range(10, 13)])
        >>> list(ds)
        [(0, 10), (1, 11), (2, 12)]
        >>> ds[4]
        (1, 11)
    """

    def __init__(self, parents: Sequence[MapDataset[Any]]) -> None:
        cores = [map_core(parent, "ZipMapDataset") for parent in _parents(parents, "ZipMapDataset")]
        super().__init__(parents)
        self._core = fn.zip(cores, strict=True)


class ZipIterDataset(IterDataset[tuple[Any, ...]]):
    """Tuples of the next elements of several datasets, as in Grain.

    With `strict` (Grain's default), parents that end at different elements
    raise ValueError after the last full tuple; without it, the first parent
    to end ends the zip. A MapDataset parent is read with `to_iter_dataset()`.

    Examples:
        >>> import grainfn as grain
        >>> a = grain.MapDataset.range(3).to_iter_dataset()
        >>> b = grain.MapDataset.source("xyzw").to_iter_dataset()
        >>> list(ZipIterDataset([a, b], strict=False))
        [(0, 'x'), (1, 'y'), (2, 'z')]
    """

    def __init__(
        self, parents: Sequence[IterDataset[Any] | MapDataset[Any]], *, strict: bool = True
    ) -> None:
        streams = [
            stream_core(parent, "ZipIterDataset") for parent in _parents(parents, "ZipIterDataset")
        ]
        super().__init__(parents)
        self._core = fn.zip(streams, strict=bool(strict))


class InterleaveIterDataset(IterDataset[T]):
    """Round robin over `cycle_length` datasets at a time, in Grain's order.

    `datasets` is a sequence of IterDatasets and MapDatasets, or a MapDataset
    whose elements are datasets (made while iterating, for example one per
    file; a None element reads as an empty dataset). The first `cycle_length`
    datasets are read one element each in turn; when one runs out, the next
    turn of its slot opens the next dataset there. The state holds each
    slot's dataset index and state, never data.

    `num_make_iter_threads`, `make_iter_buffer_size` and `iter_buffer_size`
    are accepted and checked (integers >= 0) but change nothing: grainfn
    opens each dataset when its slot first needs it and reads it in the
    calling thread (a MapDataset still reads ahead with its `ReadOptions`
    threads). Use `mp_prefetch` to compute a static sequence's map-level work
    in worker processes.

    Examples:
        >>> import grainfn as grain
        >>> shards = [grain.MapDataset.range(10 * i, 10 * i + 3) for i in range(3)]
        >>> list(InterleaveIterDataset(shards, cycle_length=2))
        [0, 10, 1, 11, 2, 12, 20, 21, 22]
    """

    def __init__(
        self,
        datasets: Sequence[IterDataset[Any] | MapDataset[Any]] | MapDataset[Any],
        *,
        cycle_length: int,
        num_make_iter_threads: int = 1,
        make_iter_buffer_size: int = 1,
        iter_buffer_size: int = 1,
    ) -> None:
        self.num_make_iter_threads = validate.check_nonnegative_int(
            num_make_iter_threads, "num_make_iter_threads"
        )
        self.make_iter_buffer_size = validate.check_nonnegative_int(
            make_iter_buffer_size, "make_iter_buffer_size"
        )
        self.iter_buffer_size = validate.check_nonnegative_int(iter_buffer_size, "iter_buffer_size")
        if isinstance(datasets, MapDataset):
            core: Any = fn.map(dataset_core, datasets.core)
        else:
            what = "InterleaveIterDataset"
            core = [stream_core(ds, what) for ds in _parents(datasets, what, allow_empty=True)]
        super().__init__()
        self._core = fn.interleave(cycle_length, core)


class WindowShuffleIterDataset(IterDataset[T]):
    """`parent`'s elements shuffled within consecutive windows of `window_size`, as in Grain.

    Window `k` is permuted with seed `seed + k`. The state is the parent's
    state at the window's start and a count, so resuming re-reads the window.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(8).to_iter_dataset()
        >>> out = list(WindowShuffleIterDataset(ds, window_size=4, seed=0))
        >>> sorted(out[:4]), sorted(out[4:])
        ([0, 1, 2, 3], [4, 5, 6, 7])
    """

    def __init__(
        self, parent: IterDataset[T] | MapDataset[T], *, window_size: int, seed: int
    ) -> None:
        stream = stream_core(parent, "WindowShuffleIterDataset")
        super().__init__(parent)
        self._core = fn.window_shuffle(window_size, stream, seed=validate.check_seed(seed))


class RebatchIterDataset(IterDataset[Any]):
    """The rows of `parent`'s batches regrouped into batches of `batch_size`, as in Grain.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(7).to_iter_dataset().batch(3)
        >>> [b.tolist() for b in RebatchIterDataset(ds, batch_size=2)]
        [[0, 1], [2, 3], [4, 5], [6]]
    """

    def __init__(
        self,
        parent: IterDataset[Any] | MapDataset[Any],
        batch_size: int,
        drop_remainder: bool = False,
    ) -> None:
        stream = stream_core(parent, "RebatchIterDataset")
        super().__init__(parent)
        self._core = fn.rebatch(batch_size, stream, drop_remainder=drop_remainder)


def dataset_core(element: Any) -> Any:
    """The core stream of one element of a MapDataset of datasets (None stays None)."""
    if element is None:
        return None
    if not isinstance(element, (MapDataset, IterDataset)):
        raise TypeError(
            f"InterleaveIterDataset needs a MapDataset whose elements are MapDatasets or "
            f"IterDatasets, got an element {element!r} of type {type(element).__name__}."
        )
    return stream_core(element, "InterleaveIterDataset")


def _parents(parents: Any, what: str, allow_empty: bool = False) -> Sequence[Any]:
    if isinstance(parents, (MapDataset, IterDataset, str, bytes)) or not isinstance(
        parents, Sequence
    ):
        raise TypeError(f"{what} takes a list of datasets, got {parents!r}.")
    if not parents and not allow_empty:
        raise ValueError(f"{what} needs at least one parent, got an empty list.")
    return parents
