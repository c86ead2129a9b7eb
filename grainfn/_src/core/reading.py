"""Reading datasets and streams: in-order iteration, stepping, and state conversion.

Also what an argument reads as: `as_dataset` and `as_stream`, the one check
every combinator makes of its data (`grainfn._src.core.arguments` lists them
with the other argument checks).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections.abc import Iterator
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.blocks import BlockReader, BlockSizer
from grainfn._src.core.dataset import INFINITE, Dataset, read_many, upstream_holes
from grainfn._src.core.filter_check import NO_CHECK, WINDOW, FilterCheck, FilterWindow
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.read_threads import InNamedThreads, NamedThreads, NamedThreadsExecutor
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class FromDatasetStream(Stream[T]):
    """The elements of a dataset in position order; `None`s are skipped unless allowed.

    With `threads > 0`, up to that many threads read up to `buffer` positions
    ahead once reading is seen to wait (see `grainfn._src.core.blocks`). With
    a `thread_name` too, every read of the dataset runs in `threads` threads
    named `f"{thread_name}_{n}"` (`reads`, see `grainfn._src.core.read_threads`),
    those read ahead once reading in the consumer proves slow. None of these
    changes the elements or the state, so none is part of the pipeline a
    state names.
    """

    spec_rule = SpecRule.PARENT

    dataset: Dataset[T]
    allow_nones: bool = False
    threads: int = 0
    buffer: int = 500
    check: FilterCheck = NO_CHECK
    """When reading warns or raises because the holes (filtered positions) are most of it."""
    thread_name: str | None = None
    reads: Dataset[T] = dataclasses.field(init=False, compare=False)
    """What a reader of this stream reads: `dataset`, in its named threads if it has them."""

    def __post_init__(self) -> None:
        reads = self.dataset
        if self.thread_name is not None:
            reads = InNamedThreads(reads, NamedThreads(self.thread_name, self.threads))
        object.__setattr__(self, "reads", reads)

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.dataset,)

    def init(self) -> records.DatasetPosition:
        return records.DatasetPosition(0)

    def open(self, state: records.DatasetPosition) -> Cursor:
        reads = self.reads
        named = None  # threads of Grain's names read ahead, once reading is seen to wait
        if isinstance(reads, InNamedThreads):
            named = functools.partial(NamedThreadsExecutor, reads, self.buffer)
        reader = BlockReader(reads, state.position, self.threads, self.buffer, thread_pool=named)
        checked = self.check.active and not self.allow_nones
        if checked and upstream_holes(self.dataset) is not None:
            stage = f"{self.describe_stage()} skipping filtered positions"
            return CheckedDatasetCursor(reader, FilterWindow(self.check, stage))
        return DatasetCursor(reader, self.allow_nones)

    def check_state(self, state: Any, path: str = "") -> None:
        if isinstance(state, (records.EpochPosition, records.SavedEpochPosition)):
            raise TypeError(
                f"{state!r} is the state of a to_jax step, which goes on past the end of "
                "the dataset (its host stream is fn.from_dataset(fn.repeat(None, ds))). Pass "
                "the to_jax value instead of the stream or dataset: fn.state_to_dict(jds, "
                "state), fn.iterate(jds, state)."
            )
        records.check_record(state, records.DatasetPosition, self.describe_stage(), path)
        length = self.dataset.length
        if length < INFINITE and state.position > length:
            where = f"{path}.position" if path else "position"
            raise validate.PositionOutOfRangeError(
                f"State field {where} is {state.position}, past the end of a dataset of length "
                f"{length} (in its epoch {state.position // length}), where "
                f"{self.describe_stage()} ends after one epoch. A state that goes on into "
                "later epochs (a to_jax step) belongs to the stream of fn.repeat(None, ds): "
                "pass that, or the to_jax value itself; otherwise the state belongs to "
                "another pipeline."
            )

    def most_delivered(self, state: records.DatasetPosition) -> int:
        return state.position  # at most one element per position

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
        # A None from a dataset without a filter is a map's (see `StrayNones`).
        self.strays = None if allow_nones or upstream_holes(reader.dataset) else StrayNones()

    def _refill(self, need: int = 1) -> None:
        try:
            self.start, self.block = self.reader.read(need)
        except StopIteration:
            if self.strays is not None:
                self.strays.check_end(self.reader.dataset)
            raise
        self.iterator = iter(self.block)

    def next(self) -> Any:
        while True:
            for element in self.iterator:
                if element is not None or self.allow_nones:
                    return element
                if self.strays is not None:
                    self._stray(self.state().position - 1)
            self._refill()  # raises StopIteration at the end

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < count:
            need = count - len(out)
            taken = list(itertools.islice(self.iterator, need))
            kept = taken if self.allow_nones else [e for e in taken if e is not None]
            if len(kept) < len(taken) and self.strays is not None:  # only where Nones came
                first = self.state().position - len(taken)
                for position, element in enumerate(taken, first):
                    if element is None:
                        self._stray(position)
            out.extend(kept)
            if len(taken) < need:  # this block is used up
                try:
                    self._refill(need - len(taken))
                except StopIteration:
                    break
        return out

    def _stray(self, position: int) -> None:
        assert self.strays is not None
        self.strays.see(position, self.reader.dataset)

    def next_many_at(self, count: int) -> tuple[list[Any], list[int]]:
        """`next_many(count)`, and the position after each element: its state once handed out.

        For a reader of blocks (`elastic_batches`' shards) that hands out
        part of a block and must know its state there without reading again.
        """
        out: list[Any] = []
        ends: list[int] = []
        while len(out) < count:
            after = self.state().position
            for element in self.iterator:
                after += 1
                if element is not None or self.allow_nones:
                    out.append(element)
                    ends.append(after)
                    if len(out) == count:
                        return out, ends
                elif self.strays is not None:
                    self._stray(after - 1)
            try:
                self._refill(count - len(out))
            except StopIteration:
                break
        return out, ends

    def state(self) -> records.DatasetPosition:
        read = len(self.block) - operator.length_hint(self.iterator)
        return records.DatasetPosition(self.start + read)

    def start_prefetch(self) -> None:
        self.reader.start_prefetch()

    def close(self) -> None:
        self.reader.close()


class StrayNones:
    """Nones read from a dataset that has no filter: what a map returned, skipped as holes.

    Grain skips them too, so a map may drop an element by returning None. But
    a map that forgot its `return` makes every element None, and the data
    would come out empty, or never end (repeated). So `WINDOW` such Nones in
    a row, or a dataset that is None from its first position to its end,
    raise a ValueError that says so.
    """

    __slots__ = ("first", "next")

    def __init__(self) -> None:
        self.first = self.next = -1  # the run of Nones in a row: its first position, and past it

    def see(self, position: int, dataset: Dataset[Any]) -> None:
        """Counts a None at `position`; raises once `WINDOW` came in a row."""
        if position != self.next:
            self.first = position
        self.next = position + 1
        if self.next - self.first >= WINDOW:
            raise ValueError(_stray_message(dataset, self.first, self.next))

    def check_end(self, dataset: Dataset[Any]) -> None:
        """At the end of the data: raises if every position was None."""
        if self.first == 0 and self.next == dataset.length:
            raise ValueError(_stray_message(dataset, self.first, self.next))


def _stray_message(dataset: Dataset[Any], first: int, stop: int) -> str:
    return (
        f"Positions {first} to {stop - 1} of {dataset.describe_stage()} were all None, and "
        "there is no filter in its pipeline: a map (or the source) returned None for each of "
        "them, a missing `return` perhaps. A None is read as a hole and skipped, so the data "
        "would come out empty, or never end. Return the element from the map; to drop "
        "elements, use filter; to keep the Nones, read with allow_nones=True "
        "(fn.from_dataset(..., allow_nones=True), or to_iter_dataset(allow_nones=True))."
    )


class CheckedDatasetCursor(DatasetCursor):
    """A DatasetCursor that judges each window of positions it reads past (`FilterCheck`)."""

    def __init__(self, reader: BlockReader, window: FilterWindow) -> None:
        super().__init__(reader, allow_nones=False)
        self.window = window  # it counts the positions until it is full, and the holes in it

    def next(self) -> Any:
        window = self.window
        left, dropped = window.left, window.dropped
        while True:
            for element in self.iterator:
                left -= 1
                if element is None:
                    dropped += 1
                if not left:
                    window.left, window.dropped = WINDOW, 0
                    window.full(dropped)
                    left, dropped = WINDOW, 0
                if element is not None:
                    window.left, window.dropped = left, dropped
                    return element
            window.left, window.dropped = left, dropped
            self._refill()  # raises StopIteration at the end

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        window = self.window
        left, dropped = window.left, window.dropped  # locals: this loop is hot
        while len(out) < count:
            need = count - len(out)
            taken = list(itertools.islice(self.iterator, need))
            size = len(taken)
            if size < left:  # the common case: inside the window
                kept = [e for e in taken if e is not None]
                left -= size
                dropped += size - len(kept)
                out += kept
            else:
                window.left, window.dropped = left, dropped
                window.see(taken)
                out.extend(e for e in taken if e is not None)
                left, dropped = window.left, window.dropped
            if size < need:  # this block is used up
                try:
                    self._refill()
                except StopIteration:
                    break
        window.left, window.dropped = left, dropped
        return out


@toolz.curry
def from_dataset(
    ds: Dataset[T],
    *,
    allow_nones: bool = False,
    threads: int = 0,
    buffer: int = 500,
    thread_name: str | None = None,
) -> Stream[T]:
    """The elements of `ds` in position order, as a stream with explicit state.

    Positions a filter emptied (None) are skipped unless `allow_nones`. With
    `threads > 0`, up to `threads` threads read up to `buffer` positions ahead
    once reading is measured to wait (slow files, network); cheap pipelines
    keep reading in the calling thread. Neither changes elements or states.

    With a `thread_name` (and `threads > 0`), every read of `ds` runs in
    `threads` threads named `f"{thread_name}_{n}"`, `n < threads`, wherever
    it is read (here, ahead, in worker processes), as Grain reads its sources
    (in `grain-prefetch_<n>`); with one thread, in position order. Blocks are
    read ahead there once reading in the consumer proves slow.

    Examples:
        >>> from grainfn.fn import range
        >>> from grainfn.fn import filter
        >>> s = from_dataset(filter(lambda x: x % 2, range(6)))
        >>> element, state = s.step(s.init())
        >>> element, state
        (1, DatasetPosition(position=2))
        >>> import threading
        >>> from grainfn import fn
        >>> names = fn.map(lambda _: threading.current_thread().name, fn.range(3))
        >>> list(iterate(from_dataset(names, threads=1, thread_name="reader")))
        ['reader_0', 'reader_0', 'reader_0']

    Raises:
        ValueError: for a `thread_name` with `threads=0`, or one that is empty.
    """
    ds = as_dataset(ds, "from_dataset")
    threads = validate.check_nonnegative_int(threads, "threads")
    buffer = validate.check_positive_int(buffer, "buffer")
    allow_nones = validate.check_flag(allow_nones, "from_dataset allow_nones")
    if thread_name is not None and not threads:
        raise ValueError(
            f"from_dataset reads in threads named {thread_name!r}_<n> only with threads >= 1, "
            "got threads=0: pass threads, or no thread_name to read in the calling thread."
        )
    return FromDatasetStream(ds, allow_nones, threads, buffer, thread_name=thread_name)


def elements(
    ds: Dataset[T], start: int = 0, stop: int | None = None, *, allow_nones: bool = False
) -> Iterator[T | None]:
    """Yields the elements at positions `start, start + 1, ...` up to `stop` (default: `length`).

    Positions are read in blocks whose index math is resolved in one call; the
    first blocks are small so the first element comes quickly. Filtered-out
    positions (None) are skipped unless `allow_nones`.

    Examples:
        >>> from grainfn import fn
        >>> list(elements(fn.filter(lambda x: x > 5, fn.range(8))))
        [6, 7]
        >>> list(elements(fn.range(8), start=6, stop=10))
        [6, 7, 0, 1]
    """
    if not isinstance(ds, Dataset):
        raise TypeError(f"elements reads a grainfn Dataset, got {type(ds).__name__}.")
    start = validate.check_integer(start, "start")
    stop = ds.length if stop is None else validate.check_integer(stop, "stop")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}.")
    sizer = BlockSizer()
    position = start
    while position < stop:
        end = min(stop, position + sizer.start())
        block = read_many(ds, np.arange(position, end, dtype=np.int64))
        sizer.done()
        yield from (block if allow_nones else [e for e in block if e is not None])
        position = end


@runtime_checkable
class HostTwin(Protocol[T]):
    """A compiled form of a pipeline that keeps states of its own: a `to_jax` value.

    Its `stream` is the host stream it reads as (its host twin); `host_state`
    turns one of its states into that stream's, and `device_state` back.
    Whatever takes a stream or a dataset for its states (`iterate`,
    `state_to_dict`, `state_from_dict`) takes one of these too.
    """

    @property
    def stream(self) -> Stream[T]: ...

    def host_state(self, state: Any) -> Any: ...

    def device_state(self, state: Any) -> Any: ...


def iterate(data: Stream[T] | Dataset[T] | HostTwin[T], state: Any = None) -> StreamIterator[T]:
    """Iterates a stream fast from `state` (default: the start); `.state` is exact at any point.

    A dataset is read as `from_dataset(data)`, and a `to_jax` value as its
    host stream, from one of its states or its stream's. Blocks of positions are resolved
    at once, and a state record is built only when `.state` is read.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.batch(2, fn.from_dataset(fn.range(5)))
        >>> it = iterate(stream)
        >>> next(it)
        array([0, 1])
        >>> saved = it.state
        >>> [b.tolist() for b in iterate(stream, saved)]
        [[2, 3], [4]]
    """
    if state is not None and isinstance(data, HostTwin):
        state = data.host_state(state)
    return StreamIterator(as_stream(data, "iterate"), state)


def as_dataset(ds: Any, what: str) -> Dataset[Any]:
    """`ds` if it is a Dataset; a clear error for a stream or anything else.

    Args:
        ds: The value a map-level combinator was given.
        what: The combinator's name, for the error.

    Returns:
        `ds` itself.

    Raises:
        TypeError: for a stream (it has no random access) or any other value,
            naming `what` and the value's type.

    Examples:
        >>> from grainfn import fn
        >>> as_dataset(fn.range(3), "shuffle")
        range(0, 3, 1)  [length 3]
        >>> as_dataset(fn.from_dataset(fn.range(3)), "shuffle")
        Traceback (most recent call last):
        ...
        TypeError: shuffle needs random access, which a stream does not have: ...
        >>> as_dataset([1, 2], "shuffle")
        Traceback (most recent call last):
        ...
        TypeError: shuffle expects a grainfn Dataset or Stream as its last argument, got [1, 2] ...
    """
    if isinstance(ds, Stream):
        raise TypeError(
            f"{what} needs random access, which a stream does not have: apply it to the "
            "dataset before fn.from_dataset."
        )
    if not isinstance(ds, Dataset):
        raise TypeError(
            f"{what} expects a grainfn Dataset or Stream as its last argument, got "
            f"{validate.short_repr(ds)} of type {type(ds).__name__}. Build one with fn.range "
            "or fn.source."
        )
    return ds


def as_stream(data: Stream[T] | Dataset[T] | HostTwin[T], what: str) -> Stream[T]:
    """`data` as a stream: every combinator that reads a stream takes its data through this.

    A stream is taken as it is, a dataset is read in order as
    `from_dataset(data)` reads it, and a `to_jax` value as its host stream.

    Args:
        data: The value a stream combinator was given.
        what: The combinator's name, for the error.

    Returns:
        The stream `data` reads as.

    Raises:
        TypeError: for any other value, naming `what`, the value, its type and
            what is allowed.

    Examples:
        >>> from grainfn import fn
        >>> as_stream(fn.range(3), "limit")
        from_dataset()
          range(0, 3, 1)  [length 3]
        >>> stream = fn.from_dataset(fn.range(3))
        >>> as_stream(stream, "limit") is stream
        True
        >>> as_stream([1, 2], "limit")
        Traceback (most recent call last):
        ...
        TypeError: limit needs a grainfn Stream or Dataset, got [1, 2] of type list. ...
    """
    if isinstance(data, Stream):
        return data
    if isinstance(data, Dataset):
        return from_dataset(data)
    if isinstance(data, HostTwin):
        return data.stream
    raise TypeError(
        f"{what} needs a grainfn Stream or Dataset, got {validate.short_repr(data)} of type "
        f"{type(data).__name__}. It takes a Stream, a Dataset (read as fn.from_dataset(ds) "
        "reads it) or a to_jax value (read as its host stream); build one with fn.range, "
        "fn.source or fn.from_iterable."
    )
