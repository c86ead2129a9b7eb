"""StreamIterator: fast iteration of a stream that loses no element to an error.

`grainfn.fn.iterate` returns one. It reads through a cursor (see
`grainfn._src.core.stream`) and keeps what it needs to stand again after the
last element it returned, whatever fails.
"""

from __future__ import annotations

import contextlib
import sys
import time
import weakref
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any, TypeVar

from grainfn._src.core import state as records
from grainfn._src.core.filter_check import with_options_applied
from grainfn._src.core.instrument import Instrument, instrumented
from grainfn._src.core.stream import BaseCursor, Cursor, Stream, reads_in_processes

T = TypeVar("T")


MARK_EVERY = 1024
"""How many elements a StreamIterator returns between two marks: states it can go back to.

Over a cursor that is not atomic and reads in worker processes, every element
is a mark: going back would read through the workers, which may be dying."""

STATE_WAIT_SECONDS = 600.0
"""How long `state`, asked in one thread, waits for a `next()` running in another."""


class ConcurrentReadError(RuntimeError):
    """One iterator read by two `next()` calls at once (the second from another thread).

    Also raised by a state asked in another thread when the running `next()`
    does not return within `STATE_WAIT_SECONDS`.
    """


class StreamIterator(Iterator[T]):
    """Iterates a stream quickly; `state` gives the exact state after the last element.

    Returned by `grainfn.fn.iterate`. No error loses an element: when reading
    the next one raises (an exception in a user function, a worker process
    that died, Ctrl-C), the iterator stays after the last element it returned,
    `state` says so, and the next read starts there again. So a transient
    fault loses nothing, and one that the element causes raises again, every
    time.

    An atomic cursor (one that a failed `next` leaves where it was, see
    `Cursor.atomic`) is simply read again. Any other is replaced: the iterator
    keeps a mark (a state it passed, taken every `MARK_EVERY` elements) and
    counts the elements since, and a new cursor
    opened at the mark and stepped that many times stands exactly where the
    failed one last stood, because the elements depend on the state alone.
    Where the reads go to worker processes, the mark is taken after every
    element instead, so the state after a failure (a worker's death, say) is
    known at once, without the workers.

    One reader at a time, as a Python generator: a `next()` while another is
    running (in another thread) raises `ConcurrentReadError` and takes nothing,
    so no element is given twice or skipped. `state` asked in another thread
    while a `next()` runs waits for it, and names the boundary after the
    element it returns; asked from inside a running `next()` (a signal handler
    that interrupted it) it names the boundary before the element being read.
    """

    def __init__(self, stream: Stream[T], state: Any = None) -> None:
        if state is None:
            state = stream.init()
        else:
            state = records.as_host(state)  # a state out of jax.jit holds 0-d arrays
            stream.check_state(state)
        self.stream = stream
        self._mark = state
        self._since_mark = 0
        self._reader: list[None] = [None]  # a token, taken by the `next()` that runs
        self._recovering: tuple[Any, int] | None = None  # (mark, count) while one moves
        self._cursor: Cursor = stream.open(state)
        fragile = not self._cursor.atomic and reads_in_processes(self._cursor)
        self._mark_every = 1 if fragile else MARK_EVERY

    def __iter__(self) -> StreamIterator[T]:
        return self

    def next_element(self) -> T:
        """Returns the next element: `next(it)` without the iterator protocol's call."""
        reader = self._reader
        try:
            reader.pop()  # one call, atomic: of two concurrent reads, one finds no token
        except IndexError:
            raise ConcurrentReadError(
                "This iterator is being read by another next() call right now (from another "
                "thread): a grainfn iterator has one reader at a time, so that each element "
                "is delivered once. Give each thread its own iterator (split the data with "
                "slice or a sharding option), or read in one thread and hand the elements "
                "over a queue."
            ) from None
        cursor = self._cursor
        try:
            element = cursor.next()
        except StopIteration:
            raise
        except BaseException:
            if not cursor.atomic:  # an atomic cursor stays where it was: read it again
                self._fail()
            raise
        finally:
            reader.append(None)
        self._since_mark += 1
        if self._since_mark >= self._mark_every:
            # The iterator's cursor, not `cursor`: a broken one has just been replaced.
            self._mark, self._since_mark = self._cursor.state(), 0
        return element

    __next__ = next_element

    def start_prefetch(self) -> None:
        """Starts the background reads now, where the pipeline reads with threads."""
        self._cursor.start_prefetch()

    def close(self) -> None:
        """Stops background reads. The state stays readable; reading on raises ValueError."""
        cursor = self._cursor
        try:
            if not isinstance(cursor, (_BrokenCursor, _ClosedCursor)):
                cursor.close()
                # A state that needs reading again can fail as a read can; the closed
                # iterator then finds it from its mark when asked.
                with contextlib.suppress(Exception):
                    self._mark, self._since_mark = cursor.state(), 0
        finally:
            self._cursor = _ClosedCursor(self)

    @property
    def state(self) -> Any:
        """The state record after the elements returned so far: resume from it with `iterate`.

        Asked from another thread while a `next()` runs, it waits for that
        `next()` and names the boundary after the element it returns. Asked
        from inside the running `next()` (a signal handler that interrupted
        it: a preemption notice), it names the boundary before the element
        being read, found without touching the interrupted reader (see
        `_state_before_next`).

        Raises:
            ConcurrentReadError: if a `next()` in another thread does not
                return within `STATE_WAIT_SECONDS`.
        """
        if not self._reader:  # a next() is running
            if self._inside_next():
                return self._state_before_next()
            self._wait_for_reader()
        return self._cursor.state()

    def _inside_next(self) -> bool:
        """Whether this runs inside this iterator's own `next()` (a signal handler, say)."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if frame.f_code is _NEXT_CODE and frame.f_locals.get("self") is self:
                return True
            frame = frame.f_back
        return False

    def _state_before_next(self) -> Any:
        """The state after the last element returned, asked while the next one is being read.

        The running cursor stands between two boundaries, so it is not asked:
        the state is the mark, or a new cursor opened at the mark and stepped
        over the elements returned since (the same elements, read again here).
        """
        # A recovery the signal interrupted may have moved the mark but not yet the count.
        mark, since_mark = self._recovering or (self._mark, self._since_mark)
        if not since_mark:
            return mark
        cursor = _reopen(self.stream, mark, since_mark)
        try:
            return cursor.state()
        finally:
            cursor.close()

    def _wait_for_reader(self) -> None:
        """Waits for the `next()` that runs in another thread."""
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while not self._reader:
            if time.monotonic() > deadline:
                raise ConcurrentReadError(
                    f"The state waited {STATE_WAIT_SECONDS:.0f} s for a next() that another "
                    "thread is running on this iterator, and it has not returned."
                )
            time.sleep(0.0005)

    def _fail(self) -> None:
        """Drops the cursor that raised; the next read or `state` opens a new one at the mark."""
        cursor, self._cursor = self._cursor, _BrokenCursor(self)
        if not isinstance(cursor, _BrokenCursor):
            with contextlib.suppress(Exception):
                cursor.close()

    def _recover(self) -> Cursor:
        """A new cursor where the iterator stands, which replaces the broken one."""
        self._recovering = (self._mark, self._since_mark)
        try:
            cursor = _reopen(self.stream, self._mark, self._since_mark)
            self._mark, self._since_mark = cursor.state(), 0
        finally:
            self._recovering = None
        self._cursor = cursor
        return cursor


_NEXT_CODE = StreamIterator.next_element.__code__


def _reopen(stream: Stream[Any], mark: Any, count: int) -> Cursor:
    """A new cursor opened at state `mark` and stepped over the `count` elements after it."""
    cursor = stream.open(mark)
    try:
        replayed = len(cursor.next_many(count)) if count else 0
        if replayed < count:
            raise RuntimeError(
                f"Reading this stream again from a state gave {replayed} elements where it "
                f"gave {count} before: its elements do not depend on the state alone (a user "
                "function with hidden state or randomness?), so the iterator cannot go back to "
                "where it was. Make the functions depend only on their input."
            )
    except BaseException:
        cursor.close()
        raise
    return cursor


class _BrokenCursor(BaseCursor):
    """Where a failed cursor stood: the first use opens a new one there (see StreamIterator)."""

    def __init__(self, iterator: StreamIterator[Any]) -> None:
        self.iterator = weakref.ref(iterator)  # no cycle: a dropped iterator goes at once

    def recover(self) -> Cursor:
        iterator = self.iterator()
        assert iterator is not None, "a broken cursor outlived its iterator"
        return iterator._recover()

    def next(self) -> Any:
        return self.recover().next()

    def next_many(self, count: int) -> list[Any]:
        return self.recover().next_many(count)

    def state(self) -> Any:
        iterator = self.iterator()
        if iterator is not None and not iterator._since_mark:  # it stands at its mark
            return iterator._mark
        return self.recover().state()

    def start_prefetch(self) -> None:
        self.recover().start_prefetch()


class _ClosedCursor(BaseCursor):
    """What a closed iterator reads: nothing, with the state it had when closed."""

    atomic = True  # reading it always raises, and changes nothing

    def __init__(self, iterator: StreamIterator[Any]) -> None:
        self.stream = iterator.stream
        self.mark, self.since_mark = iterator._mark, iterator._since_mark

    def next(self) -> Any:
        raise ValueError(
            "This iterator is closed. Make a new one, starting from its last state if needed."
        )

    def state(self) -> Any:
        if self.since_mark:  # closed after an error: find where it stood, once
            cursor = _reopen(self.stream, self.mark, self.since_mark)
            try:
                self.mark, self.since_mark = cursor.state(), 0
            finally:
                cursor.close()
        return self.mark


def open_iterator(
    stream: Stream[T], state: Any = None, instruments: Sequence[Instrument] = ()
) -> StreamIterator[T]:
    """An iterator over `stream` as a pipeline's iterator opens: its options, then instruments.

    The filter checks of `with_options` stages are applied
    (`with_options_applied`), the stream goes through `instruments` (timing,
    a pipeline graph: the Grain API's iterators pass `grainfn.config`'s), and
    the iterator starts at `state` (the start for None). Every iterator of
    the Grain API opens its pipeline here.

    Examples:
        >>> from grainfn import fn
        >>> it = open_iterator(fn.from_dataset(fn.range(4)), fn.DatasetPosition(2))
        >>> it.next_element(), it.state
        (2, DatasetPosition(position=3))
    """
    return StreamIterator(instrumented(with_options_applied(stream), instruments), state)
