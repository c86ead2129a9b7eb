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
"""

from __future__ import annotations

import dataclasses
import queue
import sys
import threading
import time
import weakref
from typing import Any, Protocol

import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
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
    spec_rule = "parent"

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
            raise error
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
