"""Grain's `prefetch` transformation: read-ahead by threads, of a dataset or an iterator.

`ThreadPrefetchIterDataset` reads a dataset ahead with the core's
`thread_prefetch`. `ThreadPrefetchDatasetIterator` reads an iterator ahead in
a background thread: a grainfn iterator through the core's `thread_prefetch`
(its states come from the stream), any other through the core's
`IteratorReadAhead`, over the iterator as it stands, taking the parent's
`get_state()` after each element. `multithread_prefetch` cuts a pipeline into
one logical shard per thread (`grainfn._src.shards.logical`) and interleaves
them, as Grain does. It is built from the core's `thread_prefetch`,
`logical_shard` and `interleave`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.iterator import StreamIterator, open_iterator
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.facade.config import config
from grainfn._src.facade.dataset import DatasetIterator, IterDataset, iter_core
from grainfn._src.shards.logical import logical_shard
from grainfn._src.stages.thread_prefetch import IteratorReadAhead

T = TypeVar("T")


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


class ThreadPrefetchDatasetIterator(DatasetIterator[T]):
    """`parent` read ahead by a background thread, up to `prefetch_buffer_size` elements.

    It goes on from where `parent` stands, and takes it over: this iterator
    yields what `parent` would have yielded next, and closing it closes
    `parent`. The states are `parent`'s own, so one restores with or without
    read-ahead; 0 turns read-ahead off.

    `parent` may be any iterator. A grainfn pipeline's iterator is read
    ahead by the core's `thread_prefetch` (and `parent` is closed at once).
    Any other is read by a thread that takes `parent.get_state()` right
    after each element, so `get_state()` is `parent`'s state after the last
    element returned, whatever was read ahead, and `set_state` stops the
    thread, calls `parent.set_state` and reads on from there. An error of
    `parent` is raised here at its place, after the elements before it; the
    next `next()` reads `parent` on from where the error left it (Grain's
    behaviour), and so does one after the end. A `parent` without
    `get_state` is read ahead all the same; `get_state()` then raises a
    TypeError naming its type. The thread stops on `close()`, and when this
    iterator is dropped without it. The two ways are two subclasses, one
    chosen when the iterator is made.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(6).to_iter_dataset())
        >>> next(it)
        0
        >>> ahead = ThreadPrefetchDatasetIterator(it, prefetch_buffer_size=2)
        >>> list(ahead)
        [1, 2, 3, 4, 5]

        Any iterator with Grain's `get_state` / `set_state`:

        >>> class Counter:
        ...     def __init__(self): self.n = 0
        ...     def __next__(self):
        ...         if self.n == 5: raise StopIteration
        ...         self.n += 1
        ...         return self.n
        ...     def get_state(self): return {"n": self.n}
        ...     def set_state(self, state): self.n = state["n"]
        >>> ahead = ThreadPrefetchDatasetIterator(Counter(), prefetch_buffer_size=3)
        >>> next(ahead), ahead.get_state()
        (1, {'n': 1})
        >>> ahead.set_state({"n": 3})
        >>> list(ahead)
        [4, 5]
        >>> ahead.close()
    """

    def __new__(cls, parent: Iterator[T], prefetch_buffer_size: int) -> Any:
        """One of two classes, chosen once by what `parent` is."""
        if cls is ThreadPrefetchDatasetIterator:
            pipeline = isinstance(parent, DatasetIterator) and hasattr(parent, "_core")
            cls = _PipelineReadAhead if pipeline else _IteratorReadAhead
        return super().__new__(cls)


class _PipelineReadAhead(ThreadPrefetchDatasetIterator[T]):
    """A grainfn pipeline's iterator read ahead by the core's `thread_prefetch`."""

    def __init__(self, parent: DatasetIterator[T], prefetch_buffer_size: int) -> None:
        size = _buffer_size(parent, prefetch_buffer_size)
        super().__init__(parent)
        stream = fn.thread_prefetch(size, parent.core.stream)
        state = parent.core.state
        parent.close()
        self._codec = StateCodec(stream)
        self._attach(open_iterator(stream, state, config.instruments))

    # A state of its own (the stream's), not the protocol's placeholders: a dataset whose
    # __iter__ returns this iterator is restored from it, not by counting (stages/iterable.py).
    get_state = DatasetIterator.get_state
    set_state = DatasetIterator.set_state


class _IteratorReadAhead(ThreadPrefetchDatasetIterator[T]):
    """Any other iterator, read by the core's `IteratorReadAhead`, its state taken after each."""

    def __init__(self, parent: Iterator[T], prefetch_buffer_size: int) -> None:
        size = _buffer_size(parent, prefetch_buffer_size)
        super().__init__(parent if isinstance(parent, DatasetIterator) else ())
        self._ahead = IteratorReadAhead(parent, size, "ThreadPrefetchDatasetIterator")
        self._next = self._ahead.__next__  # holds the reader, never this iterator

    @property
    def core(self) -> StreamIterator[T]:
        """The core iterator, which a parent that is not a grainfn iterator lacks."""
        raise AttributeError(
            f"This ThreadPrefetchDatasetIterator reads a {self._ahead.parent_type}, not a "
            "grainfn pipeline: it has no core iterator."
        )

    def get_state(self) -> Any:
        """The position after the last element returned: `parent`'s own state."""
        return self._ahead.get_state()

    def set_state(self, state: Any) -> None:
        """Continues from a state `get_state` returned (or `parent` would take)."""
        self._ahead.set_state(state)

    def start_prefetch(self) -> None:
        """Starts the background reads now, for example before restoring a model."""
        self._ahead.start_prefetch()

    def close(self) -> None:
        """Stops the thread and closes `parent`; `next` then raises ValueError."""
        self._ahead.close()

    def __repr__(self) -> str:
        return (
            f"ThreadPrefetchDatasetIterator(prefetch_buffer_size={self._ahead.size}) over a "
            f"{self._ahead.parent_type}"
        )


def _buffer_size(parent: Any, prefetch_buffer_size: Any) -> int:
    """`prefetch_buffer_size`, checked, after checking that `parent` is an iterator."""
    size = validate.check_nonnegative_int(prefetch_buffer_size, "prefetch_buffer_size")
    if not callable(getattr(parent, "__next__", None)):
        raise TypeError(
            "ThreadPrefetchDatasetIterator reads ahead an iterator (an object with "
            f"__next__), got {type(parent).__name__}. For a dataset, use "
            "grain.experimental.ThreadPrefetchIterDataset(dataset, prefetch_buffer_size=n)."
        )
    return size


def multithread_prefetch(
    ds: IterDataset[T], num_threads: int, buffer_size: int, sequential_slice: bool = False
) -> IterDataset[T]:
    """`ds` cut into `num_threads` logical shards, each read by a thread, interleaved in turn.

    Shard `i` reads positions `i, i + num_threads, ...` of the MapDatasets under
    `ds` (with `sequential_slice`, part `i` of `num_threads` contiguous parts of
    its sources); the elements come from shard 0, 1, ... in turn, as in Grain.
    So, unlike `mp_prefetch`, the order depends on `num_threads`. 0 returns
    `ds`; 1 reads it ahead in one thread.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(6).to_iter_dataset()
        >>> list(multithread_prefetch(ds, num_threads=2, buffer_size=4))
        [0, 1, 2, 3, 4, 5]
        >>> list(multithread_prefetch(ds, num_threads=2, buffer_size=4, sequential_slice=True))
        [0, 3, 1, 4, 2, 5]
    """
    threads = validate.check_nonnegative_int(num_threads, "num_threads")
    size = validate.check_nonnegative_int(buffer_size, "buffer_size")
    if threads == 0:
        return ds
    stream = iter_core(ds, "multithread_prefetch")
    if threads == 1:
        return ds._rewrap(fn.thread_prefetch(size, stream))
    shards = [
        fn.thread_prefetch(size, logical_shard(stream, i, threads, sequential=sequential_slice))
        for i in range(threads)
    ]
    return ds._rewrap(fn.interleave(threads, shards))
