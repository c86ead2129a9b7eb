"""The Stream record: iteration as a pure function of an explicit state.

A stream answers `init() -> state` and `step(state) -> (element, state)`. The
end is signalled one way only: `step` returns the `END` sentinel (and keeps
returning it for every later step). `step` never mutates anything, so stepping
from an old state repeats the same result.

For speed, iteration does not go through `step`: `open(state)` returns a
mutable cursor that reads blocks of positions at once and builds a state record
only when asked. `step` itself is `open`, one `next`, and `state`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import operator
import weakref
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

from grainfn._src import state as records
from grainfn._src.dataset import INFINITE, Dataset, pipeline_lines
from grainfn._src.parallel.threads import BlockReader

T = TypeVar("T")


class _End:
    """The type of `END`: the element `step` returns once a stream is exhausted."""

    _instance: _End | None = None

    def __new__(cls) -> _End:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "END"

    def __reduce__(self) -> str:
        return "END"


END = _End()


class Cursor(Protocol):
    """A mutable reader over a stream, private to one iteration.

    `atomic` says that a `next` that raises leaves the cursor where it was: its
    state unchanged, and the next `next` reads the same element again. A
    cursor that takes one element of an atomic child per element it returns,
    and changes itself only once it has it, is atomic; one that calls user
    functions or takes several elements is not (a StreamIterator recovers it).
    """

    atomic: bool

    def next(self) -> Any:
        """Returns the next element; raises StopIteration at the end."""
        ...

    def next_many(self, count: int) -> list[Any]:
        """Returns up to `count` next elements; fewer only at the end."""
        ...

    def state(self) -> Any:
        """The state record after the elements returned so far."""
        ...

    def start_prefetch(self) -> None:
        """Starts reading ahead in the background, where the pipeline reads with threads."""
        ...

    def close(self) -> None:
        """Releases the threads or processes the cursor holds."""
        ...


class BaseCursor:
    """Defaults: `next_many` in terms of `next`; prefetch and close reach the `children`."""

    atomic = False

    def next(self) -> Any:
        raise NotImplementedError

    def next_many(self, count: int) -> list[Any]:
        out = []
        try:
            for _ in range(count):
                out.append(self.next())
        except StopIteration:
            pass
        return out

    def children(self) -> tuple[Cursor, ...]:
        """The cursors this one reads from."""
        return ()

    def start_prefetch(self) -> None:
        for child in self.children():
            child.start_prefetch()

    def close(self) -> None:
        for child in self.children():
            child.close()


@dataclasses.dataclass(frozen=True, repr=False)
class Stream(Generic[T]):
    """A stream of elements with explicit iteration state. Build one with `grainfn.fn`."""

    @property
    def parents(self) -> tuple[Any, ...]:
        """The streams or datasets this one reads from."""
        return ()

    @property
    def pipeline_seed(self) -> int | None:
        """The seed a `seed` stage sets for downstream random stages; None elsewhere."""
        return None

    def init(self) -> Any:
        """The state before the first element."""
        raise NotImplementedError

    def step(self, state: Any) -> tuple[Any, Any]:
        """Returns `(element, next state)`, or `(END, state)` once the stream is exhausted."""
        self.check_state(state)
        cursor = self.open(state)
        try:
            element = cursor.next()
        except StopIteration:
            return END, cursor.state()
        return element, cursor.state()

    def open(self, state: Any) -> Cursor:
        """A fresh cursor starting at `state` (not validated: see `check_state`)."""
        raise NotImplementedError

    def check_state(self, state: Any, path: str = "") -> None:
        """Raises ValueError, naming the stage and field, unless `state` fits this stream."""
        raise NotImplementedError

    def describe_stage(self) -> str:
        """One line naming this stage and its arguments, without its parents."""
        return type(self).__name__

    def __repr__(self) -> str:
        return "\n".join(pipeline_lines(self))


@dataclasses.dataclass(frozen=True, repr=False)
class FromDatasetStream(Stream[T]):
    """The elements of a dataset in position order; `None`s are skipped unless allowed.

    With `threads > 0`, up to that many threads read up to `buffer` positions
    ahead once reading is seen to wait (see `grainfn._src.parallel.threads`).
    Neither changes the elements or the state, so neither is part of the
    pipeline a state names.
    """

    dataset: Dataset[T]
    allow_nones: bool = False
    threads: int = 0
    buffer: int = 500

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.dataset,)

    def init(self) -> records.DatasetPosition:
        return records.DatasetPosition(0)

    def open(self, state: Any) -> Cursor:
        reader = BlockReader(self.dataset, state.position, self.threads, self.buffer)
        return DatasetCursor(reader, self.allow_nones)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, records.DatasetPosition, self.describe_stage(), path)
        if self.dataset.length < INFINITE and state.position > self.dataset.length:
            where = f"{path}.position" if path else "position"
            raise ValueError(
                f"State field {where} is {state.position}, past the end of a dataset of length "
                f"{self.dataset.length}; this state belongs to another pipeline."
            )

    def describe_stage(self) -> str:
        nones = ", allow_nones=True" if self.allow_nones else ""
        return f"from_dataset({nones.lstrip(', ')})"


class DatasetCursor(BaseCursor):
    """Reads blocks from a BlockReader and hands out their elements one by one (`None`s skipped).

    A block is read through a list iterator, the cheapest per-element path
    Python has; the position is worked out from what is left in it only when
    the state is asked for.
    """

    atomic = True  # a failed read leaves the reader at the first position not returned

    def __init__(self, reader: BlockReader, allow_nones: bool) -> None:
        self.reader = reader
        self.allow_nones = allow_nones
        self.start = reader.position  # position of block[0]
        self.block: list[Any] = []
        self.iterator: Iterator[Any] = iter(self.block)

    def _refill(self) -> None:
        self.start, self.block = self.reader.read()
        self.iterator = iter(self.block)

    def next(self) -> Any:
        while True:
            for element in self.iterator:
                if element is not None or self.allow_nones:
                    return element
            self._refill()  # raises StopIteration at the end

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < count:
            need = count - len(out)
            taken = list(itertools.islice(self.iterator, need))
            out.extend(taken if self.allow_nones else [e for e in taken if e is not None])
            if len(taken) < need:  # this block is used up
                try:
                    self._refill()
                except StopIteration:
                    break
        return out

    def state(self) -> records.DatasetPosition:
        read = len(self.block) - operator.length_hint(self.iterator)
        return records.DatasetPosition(self.start + read)

    def start_prefetch(self) -> None:
        self.reader.start()

    def close(self) -> None:
        self.reader.close()


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
        if not isinstance(cursor, (_BrokenCursor, _ClosedCursor)):
            cursor.close()
            self._mark, self._since_mark = cursor.state(), 0
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
