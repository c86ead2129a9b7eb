"""The `limit` stage: the first `count` elements of a stream."""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, NamedTuple, TypeVar

import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream, WrappingStream

T = TypeVar("T")


@records.register
class LimitState(NamedTuple, Generic[records.Parent]):
    """State of `limit`: how many elements it has passed on."""

    taken: int
    parent: records.Parent


def _grain_limit(grain: Any, count: int, stream: Any) -> Any:
    """A stream's limit with Grain's API, which holds it as a class, not a method."""
    return grain.experimental.LimitIterDataset(stream, count)


@dataclasses.dataclass(frozen=True, repr=False)
class LimitedStream(WrappingStream[Any, LimitState[Any]]):
    """At most `count` elements of the parent."""

    spec_rule = SpecRule.PARENT
    random_stage = RandomStage(
        "limit", (ArgumentKind.COUNT,), in_grain=True, grain_twin=_grain_limit
    )

    count: int
    record = LimitState
    grain_state = GrainKeys("LimitIterDataset", LimitState, (("count_elements_read", "taken"),))
    next_index_rule = NextIndexRule.COUNTER

    def check_state(self, state: Any, path: str = "") -> None:
        super().check_state(state, path)
        records.check_at_most(state.taken, self.count, path, "taken", f"limit({self.count})")
        bound = self.parent.most_delivered(state.parent)
        records.check_at_most(state.taken, bound, path, "taken", "the parent's state")

    def most_delivered(self, state: LimitState) -> int:
        return state.taken

    def open(self, state: LimitState) -> Cursor:
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
        return LimitState(self.taken, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@toolz.curry
def limit(count: int, stream: Stream[T]) -> Stream[T]:
    """The first `count` elements of a stream.

    Examples:
        >>> from grainfn.fn import range, from_dataset
        >>> from grainfn.fn import iterate
        >>> list(iterate(limit(2, from_dataset(range(5)))))
        [0, 1]
    """
    count = validate.check_positive_int(count, "count")
    return LimitedStream(as_stream(stream, "limit"), count)
