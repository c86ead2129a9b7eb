"""The `thread_prefetch` stage: a background thread reads a stream ahead into a bounded queue.

The thread owns the parent's cursor. It puts each element in the queue with the
parent's state after it, so the state after the last element returned is
exact: the stage changes neither the elements nor the states (it adds no line
to the pipeline's description). An error in the parent reaches the consumer at
its place in the stream, with the state before it. Closing stops the thread and
closes the parent's cursor, and returns promptly: a thread in the middle of a
slow read (a network file, a user function that waits) is not waited for
longer than `CLOSE_WAIT`; it ends, and closes the parent's cursor, when that
read returns.

`IteratorReadAhead` reads any other iterator ahead the same way (a user's
checkpointable iterator, Grain's own): it takes the iterator where it
stands, and its states are what the iterator's own `get_state()` gives.
"""

from __future__ import annotations

import copy
import dataclasses
import queue
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream

_POLL = 0.1  # seconds between checks that the other side is still there
CLOSE_WAIT = 1.0
"""Seconds `close` waits for the reader thread: one stuck in a slow read is left to finish
it, see the stop flag and close the parent's cursor itself (it is a daemon thread)."""
_ENDED, _FAILED = object(), object()


@dataclasses.dataclass(frozen=True, repr=False)
class ThreadPrefetchedStream(PassThroughStream):
    """The parent's elements, read ahead by one background thread, `buffer_size` at most."""

    transparent = True  # same elements, same states
    spec_rule = SpecRule.PARENT

    buffer_size: int

    def open(self, state: Any) -> Cursor:
        if self.buffer_size == 0:
            return self.parent.open(state)
        return ReadAheadCursor(self.parent, state, self.buffer_size)

    def describe_stage(self) -> str:
        return f"thread_prefetch({self.buffer_size})"


class Opens(Protocol):
    """What a read-ahead thread reads: a stream, or anything that opens a cursor at a state."""

    def open(self, state: Any) -> Cursor: ...


class ReadAheadCursor(BaseCursor):
    """A cursor of `parent` opened at `state` and read by a background thread.

    The thread puts each element in a bounded queue with the cursor's state
    after it. The end, or an error (of reading or of a state), comes out at its
    place with the state before it, and the cursor is then done.
    """

    def __init__(self, parent: Opens, state: Any, buffer_size: int) -> None:
        self.parent, self.last_state = parent, state
        self.items: queue.Queue[tuple[Any, Any, Any]] = queue.Queue(maxsize=buffer_size)
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.done = False

    def start_prefetch(self) -> None:
        if self.thread is None and not self.done:
            # The thread holds the queue and the stop flag, never this cursor: a
            # cursor dropped without close() is freed, and its finalizer stops the thread.
            args = (self.parent, self.last_state, self.items, self.stop)
            self.thread = threading.Thread(
                target=_read, args=args, name="grainfn-thread-prefetch", daemon=True
            )
            self.thread.start()
            weakref.finalize(self, self.stop.set)

    def next(self) -> Any:
        if self.done:
            raise StopIteration
        self.start_prefetch()
        while True:
            try:
                element, error, state = self.items.get(timeout=_POLL)
                break
            except queue.Empty:
                if self.thread is not None and not self.thread.is_alive():
                    try:  # its last word may have come as the wait timed out
                        element, error, state = self.items.get_nowait()
                        break
                    except queue.Empty:
                        raise RuntimeError(  # never happens unless the thread was killed
                            "The thread_prefetch reader ended without a word; the state stays "
                            f"at {self.last_state}."
                        ) from None
        if element is _ENDED:
            self.done, self.last_state = True, state
            self._join()
            raise StopIteration
        if element is _FAILED:
            self.done = True
            self._join()
            try:
                raise error
            finally:  # held by this frame, the error would hold it back: a cycle keeping the cursor
                del error
        self.last_state = state
        return element

    def state(self) -> Any:
        return self.last_state

    def close(self) -> None:
        self.done = True
        self._join(CLOSE_WAIT)

    def _join(self, seconds: float | None = None) -> None:
        """Stops the reader and waits for it to end, at most `seconds` (None: until it does)."""
        self.stop.set()
        if sys.is_finalizing():  # joining then can hang: the daemon thread goes with the process
            return
        if self.thread is not None:
            deadline = None if seconds is None else time.monotonic() + seconds
            while self.thread.is_alive():
                if deadline is not None and time.monotonic() > deadline:
                    return  # in a slow read: it stops when the read returns
                try:  # a reader blocked on a full queue sees the stop flag within _POLL
                    while True:
                        self.items.get_nowait()
                except queue.Empty:
                    pass
                self.thread.join(timeout=_POLL)


def _read(parent: Opens, state: Any, items: queue.Queue[Any], stop: threading.Event) -> None:
    """The reader thread: the parent's elements and states into `items` until `stop`.

    Whatever fails here (opening, reading, or a state that must be read again)
    is handed over with the state before it and raised in the consumer.
    """
    cursor = None
    try:
        cursor = parent.open(state)
        cursor.start_prefetch()
        while not stop.is_set():
            try:
                element = cursor.next()
            except StopIteration:
                _put(items, stop, (_ENDED, None, cursor.state()))
                return
            after = cursor.state()
            _put(items, stop, (element, None, after))
            state = after
    except BaseException as error:  # handed over, raised in the consumer
        _put(items, stop, (_FAILED, error, state))  # the state before the failed read
    finally:
        if cursor is not None:
            cursor.close()


def _put(items: queue.Queue[Any], stop: threading.Event, item: tuple[Any, Any, Any]) -> None:
    while not stop.is_set():
        try:
            items.put(item, timeout=_POLL)
            return
        except queue.Full:
            continue


@toolz.curry
def thread_prefetch(buffer_size: int, stream: Stream[Any]) -> Stream[Any]:
    """`stream` read ahead by a background thread, up to `buffer_size` elements.

    The elements and the states are the stream's own; 0 turns read-ahead off.
    It helps where reading waits (files, network) or releases the GIL.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.map(lambda x: x * 2, fn.from_dataset(fn.range(5)))
        >>> it = fn.iterate(thread_prefetch(2, stream))
        >>> [next(it), next(it)], it.state
        ([0, 2], DatasetPosition(position=2))
        >>> it.close()
    """
    buffer_size = validate.check_nonnegative_int(buffer_size, "buffer_size")
    return ThreadPrefetchedStream(as_stream(stream, "thread_prefetch"), buffer_size)


class IteratorReadAhead(Iterator[Any]):
    """An iterator that is not a pipeline's, read ahead by a background thread where it stands.

    The thread reads `parent` through a `ReadAheadCursor`, up to `buffer_size`
    elements ahead, and takes a copy of `parent.get_state()` right after each
    element, so `get_state()` is `parent`'s state after the last element
    returned, however far the thread read. `set_state` stops the thread,
    calls `parent.set_state` and reads on from there. The end, or an error of
    `parent`, ends a run of reads at its place, after the elements before it;
    the next `next()` starts another run where `parent` stands (a parent may
    read on after either). A `parent` without `get_state` is read ahead all
    the same; `get_state()` then raises a TypeError naming its type. 0 reads
    in the caller's thread. `close()` stops the thread and closes `parent`.

    Args:
        parent: Any iterator; `get_state`, `set_state` and `close` are used where it has them.
        buffer_size: The most elements read ahead (>= 0).
        what: How messages name the iterator this one serves.

    Examples:
        >>> class Counter:
        ...     def __init__(self): self.n = 0
        ...     def __next__(self):
        ...         if self.n == 5: raise StopIteration
        ...         self.n += 1
        ...         return self.n
        ...     def get_state(self): return {"n": self.n}
        ...     def set_state(self, state): self.n = state["n"]
        >>> ahead = IteratorReadAhead(Counter(), 3)
        >>> next(ahead), ahead.get_state()
        (1, {'n': 1})
        >>> ahead.set_state({"n": 3})
        >>> list(ahead), ahead.get_state()
        ([4, 5], {'n': 5})
        >>> ahead.close()
    """

    def __init__(
        self, parent: Iterator[Any], buffer_size: int, what: str = "The read-ahead iterator"
    ) -> None:
        self.parent = parent
        self.size = validate.check_nonnegative_int(buffer_size, "buffer_size")
        self.what = what
        self.parent_type = type(parent).__qualname__
        self.last = _state_after(parent)  # the state after the last element of ended runs
        self.cursor: ReadAheadCursor | None = None
        self.closed = False

    def __iter__(self) -> IteratorReadAhead:
        return self

    def __next__(self) -> Any:
        """The next element of `parent`; StopIteration at its end."""
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
        except StopIteration:  # the run ended; the state stays the one before the end
            self.stop()
            self.last = before
            raise
        except BaseException:  # the run ended with the error, at the state before it
            self.stop()
            raise

    def start_prefetch(self) -> None:
        """Starts the background reads now."""
        if self.size > 0 and not self.closed and self.cursor is None:
            self.cursor = self._run()
            self.cursor.start_prefetch()

    def _run(self) -> ReadAheadCursor:
        """A new run of reads, from where the parent stands."""
        return ReadAheadCursor(_Standing(self.parent), self.last, self.size)

    def stop(self) -> None:
        """Ends the current run; the parent is then the caller's thread's to use."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            cursor.close()
            self.last = cursor.state()

    def get_state(self) -> Any:
        """A copy of `parent`'s state after the last element returned."""
        last = self.last if self.cursor is None else self.cursor.state()
        if isinstance(last, _NoState):
            if last.error is not None:
                raise last.error
            raise TypeError(
                f"{self.what} has no state to give: its parent, a {self.parent_type}, has no "
                "get_state(). Read ahead an iterator with get_state and set_state (a "
                "DatasetIterator) to checkpoint it."
            )
        return copy.deepcopy(last)

    def set_state(self, state: Any) -> None:
        """Stops the thread, sets `parent` to `state` and reads on from there."""
        set_state = getattr(self.parent, "set_state", None)
        if not callable(set_state):
            raise TypeError(
                f"{self.what} cannot set a state: its parent, a {self.parent_type}, has no "
                "set_state(). Read ahead an iterator with get_state and set_state (a "
                "DatasetIterator) to checkpoint it."
            )
        self.stop()  # the parent is the thread's until its run has ended
        set_state(state)
        self.last = _state_after(self.parent)

    def close(self) -> None:
        """Stops the thread and closes `parent` (where it has `close`); twice is fine."""
        if self.closed:
            return
        self.closed = True
        try:
            self.stop()
        finally:
            close = getattr(self.parent, "close", None)
            if callable(close):
                close()


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
    except Exception as error:  # raised again by IteratorReadAhead.get_state: nothing is lost
        return _NoState(error)


@dataclasses.dataclass(frozen=True, eq=False)
class _Standing:
    """An iterator opened as a cursor where it stands, whatever the state asked for.

    Its state is a copy of its own `get_state()`, which the read-ahead
    thread takes after each element.
    """

    parent: Iterator[Any]

    def open(self, state: Any) -> Cursor:
        return _StandingCursor(self.parent)


class _StandingCursor(BaseCursor):
    def __init__(self, parent: Iterator[Any]) -> None:
        self.parent = parent

    def next(self) -> Any:
        return next(self.parent)

    def state(self) -> Any:
        return _state_after(self.parent)
