"""The `filter` stage: keeps the elements a predicate accepts.

A dataset keeps its positions and reads None where the predicate said no; a
stream drops those elements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.dataset import ElementStage, function_name
from grainfn._src.core.filter_check import NO_CHECK, WINDOW, FilterCheck, FilterWindow
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream, element_before

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredDataset(ElementStage[Any]):
    """Keeps elements where `predicate(element)` is true and puts None elsewhere."""

    spec_rule = "parent"

    predicate: Callable[[Any], Any]
    makes_holes = True

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            verdict = self.predicate(element)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise
        try:
            return element if verdict else None
        except (ValueError, TypeError) as error:
            where = f"position {index}"
            raise validate.ambiguous_verdict(verdict, self.describe_stage(), where) from error

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        keep = self.predicate
        return [e if e is not None and keep(e) else None for e in self.parent._get_many(indices)]

    def describe_stage(self) -> str:
        return f"filter({function_name(self.predicate)})"


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredStream(PassThroughStream):
    """Drops the elements where `predicate` is false; a None (allowed hole) passes untouched."""

    spec_rule = "parent"

    predicate: Callable[[Any], Any]
    check: FilterCheck = NO_CHECK
    """When reading warns or raises because the filter drops most elements (not in states)."""

    def open(self, state: Any) -> Cursor:
        parent, stage = self.parent.open(state), self.describe_stage()
        if self.check.active:
            return _CheckedFilterCursor(parent, self.predicate, stage, self.check)
        return _FilterCursor(parent, self.predicate, stage)

    def describe_stage(self) -> str:
        return f"filter({function_name(self.predicate)})"


class _FilterCursor(BaseCursor):
    def __init__(self, parent: Cursor, predicate: Callable[[Any], Any], stage: str) -> None:
        self.parent, self.predicate, self.stage = parent, predicate, stage

    def next(self) -> Any:
        keep, parent = self.predicate, self.parent
        while True:  # the hot loop: the predicate inline, the error paths in helpers
            element = parent.next()
            if element is None:
                return element
            try:
                verdict = keep(element)
            except Exception as error:
                self._note(error)
                raise
            try:
                if verdict:
                    return element
            except (ValueError, TypeError) as error:
                raise self._ambiguous(verdict) from error

    def judge(self, element: Any) -> bool:
        """Whether the predicate keeps `element`; an error in it names the stage and where."""
        try:
            verdict = self.predicate(element)
        except Exception as error:
            self._note(error)
            raise
        try:
            return bool(verdict)
        except (ValueError, TypeError) as error:
            raise self._ambiguous(verdict) from error

    def _note(self, error: Exception) -> None:
        validate.note_user_error(error, self.stage, element_before(self.parent))

    def _ambiguous(self, verdict: Any) -> Exception:
        return validate.ambiguous_verdict(verdict, self.stage, element_before(self.parent))

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


class _CheckedFilterCursor(_FilterCursor):
    """A filter cursor that also judges each window of elements it sees (`FilterCheck`)."""

    def __init__(
        self, parent: Cursor, predicate: Callable[[Any], Any], stage: str, check: FilterCheck
    ) -> None:
        super().__init__(parent, predicate, stage)
        self.window = FilterWindow(check, stage)
        self.left, self.dropped = WINDOW, 0  # elements until the window is full; dropped in it

    def next(self) -> Any:
        parent, judge = self.parent, self.judge
        left, dropped = self.left, self.dropped
        while True:
            element = parent.next()
            if element is None:
                self.left, self.dropped = left, dropped
                return element
            kept = judge(element)
            left -= 1
            if not kept:
                dropped += 1
            if not left:
                self.left, self.dropped = WINDOW, 0
                self.window.full(dropped)
                left, dropped = WINDOW, 0
            if kept:
                self.left, self.dropped = left, dropped
                return element


@toolz.curry
def filter(predicate: Callable[[Any], Any], data: Data) -> Data:
    """Keeps elements where `predicate` is true.

    In a dataset the others read as None (positions stay stable); a stream
    drops them.

    Examples:
        >>> from grainfn.fn import range
        >>> filter(lambda x: x % 2 == 0, range(4)).get_many([0, 1, 2, 3])
        [0, None, 2, None]
    """
    validate.check_callable(predicate, "filter predicate")
    if isinstance(data, Stream):
        return FilteredStream(data, predicate)
    return FilteredDataset(as_dataset(data, "filter"), predicate)
