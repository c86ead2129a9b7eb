"""Stream stages: seed, map, random_map, map_with_index, filter, batch, limit, repeat, mix.

Each stage is a frozen record with a cursor class. Stages that keep no counter
of their own (map, filter, batch, seed) pass their parent's state through, so
their state is the parent's record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from grainfn._src import state as records
from grainfn._src import tree, validate
from grainfn._src.dataset import function_name
from grainfn._src.index import mixing
from grainfn._src.index.rng import ElementRng
from grainfn._src.stream import BaseCursor, Cursor, Stream


@dataclasses.dataclass(frozen=True, repr=False)
class OneParentStream(Stream[Any]):
    """Base of stream stages with one parent stream."""

    parent: Stream[Any]

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class PassThroughStream(OneParentStream):
    """Base of stages whose state is their parent's state."""

    def init(self) -> Any:
        return self.parent.init()

    def check_state(self, state: Any, path: str = "") -> None:
        self.parent.check_state(state, path)


@dataclasses.dataclass(frozen=True, repr=False)
class WrappingStream(OneParentStream):
    """Base of stages whose state is `record(counter, parent state)`, the counter starting at 0."""

    record: ClassVar[type[Any]]

    def init(self) -> Any:
        return self.record(0, self.parent.init())

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, self.record, self.describe_stage(), path)
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")


@dataclasses.dataclass(frozen=True, repr=False)
class CountingStream(WrappingStream):
    """Base of stages that count the elements they pass on, in a CountState."""

    record = records.CountState


@dataclasses.dataclass(frozen=True, repr=False)
class SeededStream(PassThroughStream):
    """Passes elements through and seeds the random stages downstream of it."""

    seed: int

    @property
    def pipeline_seed(self) -> int | None:
        return self.seed

    def open(self, state: Any) -> Cursor:
        return self.parent.open(state)

    def describe_stage(self) -> str:
        return f"seed({self.seed})"


@dataclasses.dataclass(frozen=True, repr=False)
class MappedStream(PassThroughStream):
    """`fn(element)` for every element."""

    fn: Callable[[Any], Any]

    def open(self, state: Any) -> Cursor:
        return _MapCursor(self.parent.open(state), self.fn, self.describe_stage())

    def describe_stage(self) -> str:
        return f"map({function_name(self.fn)})"


class _MapCursor(BaseCursor):
    def __init__(self, parent: Cursor, fn: Callable[[Any], Any], stage: str) -> None:
        self.parent, self.fn, self.stage = parent, fn, stage

    def next(self) -> Any:
        element = self.parent.next()
        if element is None:
            return None
        try:
            return self.fn(element)
        except Exception as error:
            validate.note_user_error(error, self.stage, _element_before(self.parent))
            raise

    def next_many(self, count: int) -> list[Any]:
        fn = self.fn
        elements = self.parent.next_many(count)
        try:
            return [None if e is None else fn(e) for e in elements]
        except Exception as error:
            where = f"one of the {len(elements)} stream elements up to {_state_of(self.parent)}"
            validate.note_user_error(error, self.stage, where)
            raise

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class RandomMappedStream(CountingStream):
    """`fn(element, rng)`; the n-th element's rng depends only on (seed, n)."""

    fn: Callable[[Any, np.random.Generator], Any]
    seed: int
    rngs: ElementRng = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rngs", ElementRng(self.seed))

    def open(self, state: Any) -> Cursor:
        fn, at = self.fn, self.rngs.at
        return _CountCursor(
            self.parent.open(state.parent),
            state.seen,
            lambda i, e: fn(e, at(i)),
            self.describe_stage(),
        )

    def describe_stage(self) -> str:
        return f"random_map({function_name(self.fn)}, seed={self.seed})"


@dataclasses.dataclass(frozen=True, repr=False)
class IndexMappedStream(CountingStream):
    """`fn(n, element)` for the n-th element of the stream."""

    fn: Callable[[int, Any], Any]

    def open(self, state: Any) -> Cursor:
        return _CountCursor(
            self.parent.open(state.parent), state.seen, self.fn, self.describe_stage()
        )

    def describe_stage(self) -> str:
        return f"map_with_index({function_name(self.fn)})"


class _CountCursor(BaseCursor):
    """Applies `fn(n, element)` to the n-th element; `None`s are counted but not mapped."""

    def __init__(
        self, parent: Cursor, count: int, fn: Callable[[int, Any], Any], stage: str
    ) -> None:
        self.parent, self.count, self.fn, self.stage = parent, count, fn, stage

    def next(self) -> Any:
        element = self.parent.next()
        index = self.count
        self.count += 1
        if element is None:
            return None
        try:
            return self.fn(index, element)
        except Exception as error:
            validate.note_user_error(error, self.stage, f"element {index} of its stream")
            raise

    def next_many(self, count: int) -> list[Any]:
        elements = self.parent.next_many(count)
        first, fn = self.count, self.fn
        self.count += len(elements)
        try:
            return [None if e is None else fn(first + i, e) for i, e in enumerate(elements)]
        except Exception as error:
            where = f"elements {first} to {self.count - 1} of its stream"
            validate.note_user_error(error, self.stage, where)
            raise

    def state(self) -> Any:
        return records.CountState(self.count, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredStream(PassThroughStream):
    """Drops the elements where `predicate` is false; a None (allowed hole) passes untouched."""

    predicate: Callable[[Any], Any]

    def open(self, state: Any) -> Cursor:
        return _FilterCursor(self.parent.open(state), self.predicate, self.describe_stage())

    def describe_stage(self) -> str:
        return f"filter({function_name(self.predicate)})"


class _FilterCursor(BaseCursor):
    def __init__(self, parent: Cursor, predicate: Callable[[Any], Any], stage: str) -> None:
        self.parent, self.predicate, self.stage = parent, predicate, stage

    def next(self) -> Any:
        keep, parent = self.predicate, self.parent
        while True:
            element = parent.next()
            if element is None:
                return element
            try:
                verdict = keep(element)
            except Exception as error:
                validate.note_user_error(error, self.stage, _element_before(parent))
                raise
            try:
                if verdict:
                    return element
            except (ValueError, TypeError) as error:
                where = _element_before(parent)
                raise validate.ambiguous_verdict(verdict, self.stage, where) from error

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class BatchedStream(PassThroughStream):
    """Consecutive elements batched; a short last batch unless `drop_remainder`."""

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None

    def open(self, state: Any) -> Cursor:
        return _BatchCursor(
            self.parent.open(state),
            self.batch_size,
            self.drop_remainder,
            self.batch_fn or tree.stack,
        )

    def describe_stage(self) -> str:
        extra = ", drop_remainder=True" if self.drop_remainder else ""
        fn = f", batch_fn={function_name(self.batch_fn)}" if self.batch_fn else ""
        return f"batch({self.batch_size}{extra}{fn})"


class _BatchCursor(BaseCursor):
    def __init__(
        self, parent: Cursor, size: int, drop: bool, make: Callable[[Sequence[Any]], Any]
    ) -> None:
        self.parent, self.size, self.drop, self.make = parent, size, drop, make

    def next(self) -> Any:
        values = self.parent.next_many(self.size)
        if not values or (self.drop and len(values) < self.size):
            raise StopIteration
        return self.make(values)

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class LimitedStream(WrappingStream):
    """At most `count` elements of the parent."""

    count: int
    record = records.LimitState

    def open(self, state: Any) -> Cursor:
        return _LimitCursor(self.parent.open(state.parent), state.taken, self.count)

    def describe_stage(self) -> str:
        return f"limit({self.count})"


class _LimitCursor(BaseCursor):
    def __init__(self, parent: Cursor, taken: int, count: int) -> None:
        self.parent, self.taken, self.count = parent, taken, count
        self.atomic = parent.atomic

    def next(self) -> Any:
        if self.taken >= self.count:
            raise StopIteration
        element = self.parent.next()
        self.taken += 1
        return element

    def state(self) -> Any:
        return records.LimitState(self.taken, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class RepeatedStream(WrappingStream):
    """The parent's elements again and again, `num_epochs` times or forever (None).

    Each repetition restarts the parent from its initial state, so it yields the
    same elements. A repetition that yields nothing ends the stream instead of
    looping forever.
    """

    num_epochs: int | None
    record = records.RepeatState

    def open(self, state: Any) -> Cursor:
        return _RepeatCursor(self.parent, state.epoch, state.parent, self.num_epochs)

    def describe_stage(self) -> str:
        return f"repeat({'forever' if self.num_epochs is None else self.num_epochs})"


class _RepeatCursor(BaseCursor):
    def __init__(self, parent: Stream[Any], epoch: int, state: Any, num_epochs: int | None) -> None:
        self.parent, self.epoch, self.num_epochs = parent, epoch, num_epochs
        self.initial = parent.init()
        self.cursor = parent.open(state)
        self.atomic = self.cursor.atomic
        self.fresh = state == self.initial  # this epoch started from the parent's beginning
        self.produced = False

    def next(self) -> Any:
        while self.num_epochs is None or self.epoch < self.num_epochs:
            try:
                element = self.cursor.next()
            except StopIteration:
                if self.fresh and not self.produced:
                    self.epoch = self.num_epochs if self.num_epochs is not None else self.epoch
                    raise
                self.epoch += 1
                self.cursor.close()
                self.cursor = self.parent.open(self.initial)
                self.fresh, self.produced = True, False
                continue
            self.produced = True
            return element
        raise StopIteration

    def state(self) -> Any:
        return records.RepeatState(self.epoch, self.cursor.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.cursor,)


@dataclasses.dataclass(frozen=True, repr=False)
class MixedStream(Stream[Any]):
    """Interleaves component streams in fixed proportions; stops when the one due runs out."""

    components: tuple[Stream[Any], ...]
    weights: tuple[float, ...]
    names: tuple[str, ...] | None = None
    proportions: tuple[int, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "proportions", mixing.int_proportions(self.weights))

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.components

    def init(self) -> Any:
        return records.MixState(0, False, tuple(c.init() for c in self.components))

    def open(self, state: Any) -> Cursor:
        cursors = [c.open(s) for c, s in zip(self.components, state.components)]
        return _MixCursor(cursors, self.proportions, state.position, state.stopped)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, records.MixState, self.describe_stage(), path)
        where = f"{path}.components" if path else "components"
        if not isinstance(state.components, tuple) or len(state.components) != len(self.components):
            raise ValueError(
                f"State field {where} must hold {len(self.components)} component states, "
                f"got {records.describe_value(state.components)}."
            )
        for i, (component, sub) in enumerate(zip(self.components, state.components)):
            component.check_state(sub, f"{where}[{i}]")

    def describe_stage(self) -> str:
        if self.names is not None:
            return f"mix({dict(zip(self.names, self.weights))})"
        return f"mix(weights={list(self.weights)})"


class _MixCursor(BaseCursor):
    def __init__(
        self, cursors: list[Cursor], proportions: tuple[int, ...], index: int, stopped: bool
    ) -> None:
        self.cursors, self.index, self.stopped = cursors, index, stopped
        self.pattern = mixing.mix_pattern(proportions)
        self.atomic = all(cursor.atomic for cursor in cursors)

    def next(self) -> Any:
        if self.stopped:
            raise StopIteration
        component = self.pattern(self.index)
        try:
            element = self.cursors[component].next()
        except StopIteration:
            self.index += 1
            self.stopped = True
            raise
        self.index += 1  # only once the component gave it: a failure changes nothing
        return element

    def state(self) -> Any:
        return records.MixState(self.index, self.stopped, tuple(c.state() for c in self.cursors))

    def children(self) -> tuple[Cursor, ...]:
        return tuple(self.cursors)


def _element_before(cursor: Cursor) -> str:
    """Where a cursor's last element was, for an error note: the state it ended at."""
    return f"the stream element that ends at {_state_of(cursor)}"


def _state_of(cursor: Cursor) -> str:
    return f"state {cursor.state()}"
