"""Grain's `interleave` transformation: InterleaveIterDataset, over `fn.interleave`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.facade.dataset import IterDataset, MapDataset, stream_core

T = TypeVar("T")


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
            core = [
                stream_core(ds, what)
                for ds in validate.check_list(datasets, what, allow_empty=True)
            ]
        super().__init__()
        self._core = fn.interleave(cycle_length, core)


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
