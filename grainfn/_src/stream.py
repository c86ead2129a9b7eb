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

import dataclasses
import time
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from grainfn._src import state as records
from grainfn._src.dataset import INFINITE, Dataset, pipeline_lines

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
    """A mutable reader over a stream, private to one iteration."""

    def next(self) -> Any:
        """Returns the next element; raises StopIteration at the end."""
        ...

    def next_many(self, count: int) -> list[Any]:
        """Returns up to `count` next elements; fewer only at the end."""
        ...

    def state(self) -> Any:
        """The state record after the elements returned so far."""
        ...


class BaseCursor:
    """`next_many` in terms of `next`, for cursors with no faster way."""

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


class BlockSizer:
    """Chooses how many positions to read at once: growing while reads are cheap.

    Blocks start at one position (a single `step` reads one element) and double
    while a block takes under 2 ms, up to 1024; a block over 20 ms halves the
    next one, so slow or large elements are not read far ahead. Output never
    depends on the block size, only speed and memory do.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.size = 1
        self.limit = limit
        self._started = 0.0

    def start(self) -> int:
        self._started = time.perf_counter()
        return self.size

    def done(self) -> None:
        elapsed = time.perf_counter() - self._started
        if elapsed < 0.002:
            self.size = min(self.limit, self.size * 2)
        elif elapsed > 0.02:
            self.size = max(1, self.size // 2)


@dataclasses.dataclass(frozen=True, repr=False)
class FromDatasetStream(Stream[T]):
    """The elements of a dataset in position order; `None`s are skipped unless allowed."""

    dataset: Dataset[T]
    allow_nones: bool = False

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.dataset,)

    def init(self) -> records.DatasetPosition:
        return records.DatasetPosition(0)

    def open(self, state: Any) -> Cursor:
        return _DatasetCursor(self.dataset, state.position, self.allow_nones)

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


class _DatasetCursor(BaseCursor):
    def __init__(self, dataset: Dataset[Any], position: int, allow_nones: bool) -> None:
        self.dataset = dataset
        self.length = dataset.length
        self.allow_nones = allow_nones
        self.buffer: list[Any] = []
        self.start = position  # position of buffer[0]
        self.offset = 0  # buffer[offset] is the next element
        self.sizer = BlockSizer()

    def _refill(self) -> None:
        first = self.start + len(self.buffer)
        if first >= self.length:
            raise StopIteration
        stop = min(self.length, first + self.sizer.start())
        self.buffer = self.dataset._get_many(np.arange(first, stop, dtype=np.int64))
        self.sizer.done()
        self.start, self.offset = first, 0

    def next(self) -> Any:
        while True:
            if self.offset >= len(self.buffer):
                self._refill()
            element = self.buffer[self.offset]
            self.offset += 1
            if element is not None or self.allow_nones:
                return element

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < count:
            if self.offset >= len(self.buffer):
                try:
                    self._refill()
                except StopIteration:
                    break
            take = self.buffer[self.offset : self.offset + count - len(out)]
            self.offset += len(take)
            out.extend(take if self.allow_nones else [e for e in take if e is not None])
        return out

    def state(self) -> records.DatasetPosition:
        return records.DatasetPosition(self.start + self.offset)


class StreamIterator(Iterator[T]):
    """Iterates a stream quickly; `state` gives the exact state after the last element.

    Returned by `grainfn.fn.iterate`.
    """

    def __init__(self, stream: Stream[T], state: Any = None) -> None:
        if state is None:
            state = stream.init()
        else:
            stream.check_state(state)
        self.stream = stream
        self._cursor = stream.open(state)

    def __iter__(self) -> StreamIterator[T]:
        return self

    def __next__(self) -> T:
        return self._cursor.next()

    @property
    def state(self) -> Any:
        """The state record after the elements returned so far: resume from it with `iterate`."""
        return self._cursor.state()
