"""StreamIterator: fast iteration of a stream that loses no element to an error.

`grainfn.fn.iterate` returns one. It reads through a cursor (see
`grainfn._src.core.stream`) and keeps what it needs to stand again after the
last element it returned, whatever fails.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any, TypeVar

from grainfn._src.core import state as records
from grainfn._src.core.stream import BaseCursor, Cursor, Stream

T = TypeVar("T")


MARK_EVERY = 1024
"""How many elements a StreamIterator returns between two marks: states it can go back to."""


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
        self._cursor: Cursor = stream.open(state)
        if getattr(self._cursor, "atomic", False):
            self.next_element = self._cursor.next  # type: ignore[method-assign]

    def __iter__(self) -> StreamIterator[T]:
        return self

    def __next__(self) -> T:
        return self.next_element()

    def next_element(self) -> T:
        """Returns the next element: `next(it)` without the iterator protocol's call.

        An atomic cursor's own `next` takes this method's place (no counting
        needed); the instance never holds a method of its own, so that it is
        freed (and its worker processes stopped) as soon as it is dropped.
        """
        try:
            element = self._cursor.next()
        except StopIteration:
            raise
        except BaseException:
            self._fail()
            raise
        self._since_mark += 1
        if self._since_mark >= MARK_EVERY:
            self._mark, self._since_mark = self._cursor.state(), 0
        return element

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
            self.next_element = self._cursor.next  # type: ignore[method-assign]

    @property
    def state(self) -> Any:
        """The state record after the elements returned so far: resume from it with `iterate`."""
        return self._cursor.state()

    def _fail(self) -> None:
        """Drops the cursor that raised; the next read or `state` opens a new one at the mark."""
        cursor, self._cursor = self._cursor, _BrokenCursor(self)
        if not isinstance(cursor, _BrokenCursor):
            with contextlib.suppress(Exception):
                cursor.close()

    def _recover(self) -> Cursor:
        """A new cursor where the iterator stands, which replaces the broken one."""
        cursor = _reopen(self.stream, self._mark, self._since_mark)
        self._mark, self._since_mark = cursor.state(), 0
        self._cursor = cursor
        return cursor


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
        return self.recover().state()

    def start_prefetch(self) -> None:
        self.recover().start_prefetch()


class _ClosedCursor(BaseCursor):
    """What a closed iterator reads: nothing, with the state it had when closed."""

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
