"""The `take_while` stage: a stream's elements up to the first one a predicate refuses.

The refused element is read and dropped, and the stream ends there for good:
later elements are never read, even those the predicate would accept. A None
(an allowed hole of `from_dataset(..., allow_nones=True)`) passes untouched,
as through `filter`. The state is the parent's and whether the end was met,
so a run resumed after the end stays ended.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_stream
from grainfn._src.core.dataset import function_name
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream, Stream, element_before

T = TypeVar("T")


@records.register
class TakeWhileState(NamedTuple, Generic[records.Parent]):
    """State of `take_while`: whether the predicate refused an element, and the parent's state."""

    stopped: bool
    parent: records.Parent


@dataclasses.dataclass(frozen=True, repr=False)
class TakenWhileStream(OneParentStream[Any, TakeWhileState[Any]]):
    """The parent's elements while `predicate` accepts them."""

    spec_rule = SpecRule.PARENT
    random_stage = RandomStage("take_while", (ArgumentKind.PREDICATE,))

    predicate: Callable[[Any], Any]

    def init(self) -> TakeWhileState:
        return TakeWhileState(False, self.parent.init())

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, TakeWhileState, self.describe_stage(), path)
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")

    def most_delivered(self, state: TakeWhileState) -> int | None:
        return self.parent.most_delivered(state.parent)

    def open(self, state: TakeWhileState) -> Cursor:
        stopped = bool(records.as_host(state.stopped))
        return _TakeWhileCursor(self.parent.open(state.parent), stopped, self)

    def describe_stage(self) -> str:
        return f"take_while({function_name(self.predicate)})"


class _TakeWhileCursor(BaseCursor):
    def __init__(self, parent: Cursor, stopped: bool, stream: TakenWhileStream) -> None:
        self.parent, self.stopped = parent, stopped
        self.predicate, self.stage = stream.predicate, stream.describe_stage()

    def next(self) -> Any:
        if self.stopped:
            raise StopIteration
        element = self.parent.next()
        if element is None:
            return None
        try:
            verdict = self.predicate(element)
        except Exception as error:
            validate.note_user_error(error, self.stage, element_before(self.parent))
            raise
        try:
            keep = validate.verdict_truth(verdict)
        except (ValueError, TypeError) as error:
            where = element_before(self.parent)
            raise validate.ambiguous_verdict(verdict, self.stage, where) from error
        if not keep:
            self.stopped = True
            raise StopIteration
        return element

    def state(self) -> TakeWhileState:
        return TakeWhileState(self.stopped, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@toolz.curry
def take_while(predicate: Callable[[T], Any], data: Data) -> Stream[T]:
    """The elements of a stream (or of a dataset, in order) up to the first `predicate` refuses.

    That element is dropped and the stream ends: nothing after it is read.

    Examples:
        >>> from grainfn import fn
        >>> list(fn.iterate(take_while(lambda x: x < 3, fn.range(10))))
        [0, 1, 2]
        >>> stream = take_while(lambda x: x != 4, fn.from_dataset(fn.range(10)))
        >>> element, state = stream.step(stream.init())
        >>> element, state
        (0, TakeWhileState(stopped=False, parent=DatasetPosition(position=1)))
    """
    if not callable(predicate):
        raise TypeError(
            f"take_while takes a predicate, a callable element -> bool, first; got "
            f"{records.describe_value(predicate)}."
        )
    return TakenWhileStream(as_stream(data, "take_while"), predicate)
