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
import itertools
import operator
from collections.abc import Callable, Iterator
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

    def start_prefetch(self) -> None:
        """Starts reading ahead in the background, where the pipeline reads with threads."""
        ...

    def close(self) -> None:
        """Releases the threads or processes the cursor holds."""
        ...


class BaseCursor:
    """Defaults: `next_many` in terms of `next`; prefetch and close reach the `children`."""

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
        self.next_element: Callable[[], T] = self._cursor.next
        """Returns the next element: `next(it)` without the iterator protocol's call."""

    def __iter__(self) -> StreamIterator[T]:
        return self

    def __next__(self) -> T:
        return self.next_element()

    def start_prefetch(self) -> None:
        """Starts the background reads now, where the pipeline reads with threads."""
        self._cursor.start_prefetch()

    def close(self) -> None:
        """Stops background reads. The state stays readable; reading on raises ValueError."""
        self._cursor.close()
        self._cursor = _ClosedCursor(self._cursor.state())
        self.next_element = self._cursor.next

    @property
    def state(self) -> Any:
        """The state record after the elements returned so far: resume from it with `iterate`."""
        return self._cursor.state()


class _ClosedCursor(BaseCursor):
    """What a closed iterator reads: nothing, with the state it had when closed."""

    def __init__(self, state: Any) -> None:
        self._state = state

    def next(self) -> Any:
        raise ValueError(
            "This iterator is closed. Make a new one, starting from its last state if needed."
        )

    def state(self) -> Any:
        return self._state
