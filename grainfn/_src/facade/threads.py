"""Grain's thread-prefetch names that take an iterator or cut a dataset for threads.

`ThreadPrefetchDatasetIterator` reads an iterator ahead in a background
thread: a grainfn iterator through the core's `thread_prefetch` (its states
come from the stream), any other through the same read-ahead cursor, over the iterator as it
stands, taking the parent's `get_state()` after each element. `multithread_prefetch` cuts a
pipeline into one logical shard per thread (`grainfn._src.elastic.shards`)
and interleaves them, as Grain does. It is built from the core's
`thread_prefetch`, `logical_shard` and `interleave`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.iterator import StreamIterator, open_iterator
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.core.stream import BaseCursor, Cursor
from grainfn._src.device.put import check_device, host_thread_buffer, put_on_device
from grainfn._src.elastic.shards import logical_shard
from grainfn._src.facade.config import config
from grainfn._src.facade.datasets import IterDataset, iter_core
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.stages.thread_prefetch import ReadAheadCursor

T = TypeVar("T")


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
    iterator is dropped without it.

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

    _ahead: _IteratorReadAhead | None = None  # set for an iterator that is not grainfn's

    def __init__(self, parent: Iterator[T], prefetch_buffer_size: int) -> None:
        size = validate.check_nonnegative_int(prefetch_buffer_size, "prefetch_buffer_size")
        if not callable(getattr(parent, "__next__", None)):
            raise TypeError(
                "ThreadPrefetchDatasetIterator reads ahead an iterator (an object with "
                f"__next__), got {type(parent).__name__}. For a dataset, use "
                "grain.experimental.ThreadPrefetchIterDataset(dataset, prefetch_buffer_size=n)."
            )
        if not (isinstance(parent, DatasetIterator) and hasattr(parent, "_core")):
            super().__init__(parent if isinstance(parent, DatasetIterator) else ())
            self._ahead = _IteratorReadAhead(parent, size)
            self._next = self._ahead.next  # holds the reader, never this iterator
            return
        super().__init__(parent)
        stream = fn.thread_prefetch(size, parent.core.stream)
        state = parent.core.state
        parent.close()
        self._codec = StateCodec(stream)
        self._attach(open_iterator(stream, state, config.instruments))

    @property
    def core(self) -> StreamIterator[T]:
        """The core iterator (AttributeError when `parent` is not a grainfn iterator)."""
        if self._ahead is not None:
            raise AttributeError(
                f"This ThreadPrefetchDatasetIterator reads a {self._ahead.parent_type}, not a "
                "grainfn pipeline: it has no core iterator."
            )
        return self._core

    def get_state(self) -> Any:
        """The position after the last element returned: `parent`'s own state."""
        if self._ahead is not None:
            return self._ahead.get_state()
        return super().get_state()

    def set_state(self, state: Any) -> None:
        """Continues from a state `get_state` returned (or `parent` would take)."""
        if self._ahead is not None:
            self._ahead.set_state(state)
        else:
            super().set_state(state)

    def start_prefetch(self) -> None:
        """Starts the background reads now, for example before restoring a model."""
        if self._ahead is not None:
            self._ahead.start_prefetch()
        else:
            super().start_prefetch()

    def close(self) -> None:
        """Stops the thread and closes `parent`; `next` then raises ValueError."""
        if self._ahead is not None:
            self._ahead.close()
        else:
            super().close()

    def __repr__(self) -> str:
        if self._ahead is not None:
            return (
                f"ThreadPrefetchDatasetIterator(prefetch_buffer_size={self._ahead.size}) over a "
                f"{self._ahead.parent_type}"
            )
        return super().__repr__()


@dataclasses.dataclass(frozen=True)
class _NoState:
    """What stands for a state the parent could not give: it has no get_state, or it raised."""

    error: Exception | None


def _state_after(parent: Any) -> Any:
    """A copy of `parent.get_state()` (the parent may change what it returned), or `_NoState`."""
    get_state = getattr(parent, "get_state", None)
    if not callable(get_state):
        return _NoState(None)
    try:
        return copy.deepcopy(get_state())
    except Exception as error:  # raised again by the wrapper's get_state: nothing is lost
        return _NoState(error)


@dataclasses.dataclass(frozen=True, eq=False)
class _Iterator:
    """An iterator that is not grainfn's, opened as a cursor where it stands.

    Its state is a copy of its own `get_state()`, which the core's read-ahead
    thread takes after each element.
    """

    parent: Iterator[Any]

    def open(self, state: Any) -> Cursor:
        return _IteratorCursor(self.parent)


class _IteratorCursor(BaseCursor):
    def __init__(self, parent: Iterator[Any]) -> None:
        self.parent = parent

    def next(self) -> Any:
        return next(self.parent)

    def state(self) -> Any:
        return _state_after(self.parent)


class _IteratorReadAhead:
    """Any iterator read ahead by the core's read-ahead cursor, one per run of reads.

    The end or an error ends a run; the next `next` starts another where the
    parent stands (Grain's behaviour: a parent may read on after either).
    """

    def __init__(self, parent: Iterator[Any], size: int) -> None:
        self.parent, self.size = parent, size
        self.parent_type = type(parent).__qualname__
        self.last = _state_after(parent)  # the state after the last element of ended runs
        self.cursor: ReadAheadCursor | None = None
        self.closed = False

    def next(self) -> Any:
        if self.closed:
            raise ValueError(
                "This iterator is closed. Make a new one, starting from its last state if needed."
            )
        if self.size == 0:  # no read-ahead: the caller's thread reads
            element = next(self.parent)
            self.last = _state_after(self.parent)
            return element
        if self.cursor is None:
            self.cursor = self._run()
        before = self.cursor.state()
        try:
            return self.cursor.next()
        except StopIteration:  # the run ended; Grain's state stays the one before the end
            self.stop()
            self.last = before
            raise
        except BaseException:  # the run ended with the error, at the state before it
            self.stop()
            raise

    def start_prefetch(self) -> None:
        if self.size > 0 and not self.closed and self.cursor is None:
            self.cursor = self._run()
            self.cursor.start_prefetch()

    def _run(self) -> ReadAheadCursor:
        """A new run of reads, from where the parent stands."""
        return ReadAheadCursor(_Iterator(self.parent), self.last, self.size)

    def stop(self) -> None:
        """Ends the current run; the parent is then this thread's to use."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            cursor.close()
            self.last = cursor.state()

    def get_state(self) -> Any:
        last = self.last if self.cursor is None else self.cursor.state()
        if isinstance(last, _NoState):
            if last.error is not None:
                raise last.error
            raise TypeError(
                f"ThreadPrefetchDatasetIterator has no state to give: its parent, a "
                f"{self.parent_type}, has no get_state(). Read ahead an iterator with "
                "get_state and set_state (a DatasetIterator) to checkpoint it."
            )
        return copy.deepcopy(last)

    def set_state(self, state: Any) -> None:
        set_state = getattr(self.parent, "set_state", None)
        if not callable(set_state):
            raise TypeError(
                f"ThreadPrefetchDatasetIterator cannot set a state: its parent, a "
                f"{self.parent_type}, has no set_state(). Read ahead an iterator with "
                "get_state and set_state (a DatasetIterator) to checkpoint it."
            )
        self.stop()  # the parent is the thread's until its run has ended
        set_state(state)
        self.last = _state_after(self.parent)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.stop()
        finally:
            close = getattr(self.parent, "close", None)
            if callable(close):
                close()


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


def device_put(
    ds: IterDataset[T], device: Any, *, cpu_buffer_size: int = 4, device_buffer_size: int = 2
) -> IterDataset[T]:
    """`ds` moved to `device` (as `jax.device_put` takes it), read ahead on both sides.

    Built on `grainfn.fn.put_on_device`: each element is handed to
    `jax.device_put` in the consumer's thread, `device_buffer_size` elements
    ahead of the one returned, so that their copies run while the consumer's
    step does. A host thread reads ahead only where it pays: for a device off
    the host's CPU. The states are `ds`'s own: a state saved here restores
    `ds` without `device_put`, and the other way round.

    Args:
        ds: The dataset to read.
        device: Where the elements go, as `jax.device_put` takes it: a
            `jax.Device`, a `Sharding`, or a pytree of them.
        cpu_buffer_size: Elements a background thread reads ahead on the host
            (`thread_prefetch`) for an accelerator; 0: no thread. For a CPU
            device no thread is started (see
            `grainfn._src.device.put.host_thread_buffer`): there it costs more
            than it gives, and the elements are read in the consumer's thread.
        device_buffer_size: Elements handed to `jax.device_put` ahead of the
            one returned (`put_on_device`'s `ahead`); 0 puts each when asked.

    Returns:
        `ds` with its elements as jax arrays on `device`.

    Examples:
        >>> import jax
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(3).to_iter_dataset()
        >>> it = iter(device_put(ds, jax.devices()[0]))
        >>> int(next(it))
        0
        >>> plain = iter(ds)
        >>> plain.set_state(it.get_state())  # the states are ds's own
        >>> list(plain), [int(x) for x in it]
        ([1, 2], [1, 2])
    """
    cpu = validate.check_nonnegative_int(cpu_buffer_size, "cpu_buffer_size")
    ahead = validate.check_nonnegative_int(device_buffer_size, "device_buffer_size")
    stream = iter_core(ds, "device_put")
    stream = fn.thread_prefetch(host_thread_buffer(check_device(device), cpu), stream)
    return ds._rewrap(put_on_device(device, stream, ahead=ahead))
