"""The `filter` stage: keeps the elements a predicate accepts.

A dataset keeps its positions and reads None where the predicate said no; a
stream drops those elements.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.dataset import ElementStage, function_name, read_each, upstream_holes
from grainfn._src.core.filter_check import NO_CHECK, WINDOW, FilterCheck, FilterWindow
from grainfn._src.core.loader_records import IN_EACH_WORKER
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import (
    BaseCursor,
    Cursor,
    PassThroughStream,
    Stream,
    element_before,
    state_of,
)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredDataset(ElementStage[Any]):
    """Keeps elements where `predicate(element)` is true and puts None elsewhere."""

    random_stage = RandomStage("filter", (ArgumentKind.PREDICATE,), in_grain=True)
    device_refusal = (
        "a filter leaves empty positions (None), so a position no longer names an element "
        "of a fixed shape. Keep the predicate as data instead: fn.map(lambda x: (x, keep(x)), "
        "ds) runs on device, and the step can mask what keep rejects"
    )

    spec_rule = SpecRule.PARENT
    loader_records = IN_EACH_WORKER
    elementwise = True

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
            return element if validate.verdict_truth(verdict) else None
        except (ValueError, TypeError) as error:
            where = f"position {index}"
            raise validate.ambiguous_verdict(verdict, self.describe_stage(), where) from error

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        keep, elements = self.predicate, self.parent._get_many(indices)
        try:
            verdicts = [False if e is None else keep(e) for e in elements]
            if not all_bools(verdicts):
                verdicts = [validate.verdict_truth(v) for v in verdicts]
        except (StopIteration, TypeError, ValueError):
            # StopIteration is never out of a dataset, and a verdict must be a bool: `_get`
            # names the element and what went wrong.
            return read_each(self, indices)
        return [e if kept else None for e, kept in zip(elements, verdicts)]

    def describe_stage(self) -> str:
        return f"filter({function_name(self.predicate)})"


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredStream(PassThroughStream):
    """Drops the elements where `predicate` is false; a None (allowed hole) passes untouched."""

    spec_rule = SpecRule.PARENT
    random_stage = RandomStage("filter", (ArgumentKind.PREDICATE,), in_grain=True)
    loader_records = IN_EACH_WORKER

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

    def moved_into_dataset(self, leaf: Any) -> Stream[Any] | None:
        # Only onto a dataset without holes: Grain's filter check then counts the same
        # elements in the same windows.
        if upstream_holes(leaf.dataset) is not None:
            return None
        dataset = FilteredDataset(leaf.dataset, self.predicate)
        return dataclasses.replace(leaf, dataset=dataset, check=self.check)


_BOOLS = frozenset((bool, np.bool_))


def all_bools(verdicts: list[Any]) -> bool:
    """Whether every verdict is a bool (Python's or numpy's): the check runs at C speed."""
    return _BOOLS.issuperset(map(type, verdicts))


BLOCK_FROM = 32
"""Fewer missing elements than this are taken one by one: a block of a few costs more."""


class _FilterCursor(BaseCursor):
    """Drops what the predicate refuses; `next_many` judges whole blocks of the parent's elements.

    A block is never larger than what is still missing, so no element is taken
    from the parent that this cursor does not hand out.
    """

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
                self._note(error, element_before(parent))
                raise
            try:
                if verdict is True or (verdict is not False and validate.verdict_truth(verdict)):
                    return element
            except (ValueError, TypeError) as error:
                raise self._ambiguous(verdict, element_before(parent)) from error

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while count - len(out) >= BLOCK_FROM:
            need = count - len(out)
            taken = self.parent.next_many(need)
            out += self._kept(taken)
            if len(taken) < need:  # the parent ended
                return out
        return out + super().next_many(count - len(out))

    def _kept(self, taken: list[Any]) -> list[Any]:
        """The elements of a block the predicate keeps (a None is kept)."""
        keep = self.predicate
        try:
            verdicts = [True if e is None else keep(e) for e in taken]
            if not all_bools(verdicts):
                verdicts = [validate.verdict_truth(v) for v in verdicts]
        except Exception as error:
            self._judge_each(taken, error)
            raise
        return list(itertools.compress(taken, verdicts))

    def _judge_each(self, taken: list[Any], error: Exception) -> None:
        """Finds the element of a failed block whose judging fails, and raises its error.

        If none fails again, `error`, the block's, gets the note (or, a
        StopIteration, is raised as a UserStopIterationError) naming the block.
        """
        if len(taken) == 1:
            where = element_before(self.parent)
        else:
            where = f"one of the {len(taken)} stream elements up to {state_of(self.parent)}"
        for element in taken:  # a pure predicate fails again on the same element
            if element is None:
                continue
            try:
                verdict = self.predicate(element)
            except Exception as again:
                self._note(again, where)
                raise
            try:
                validate.verdict_truth(verdict)
            except (ValueError, TypeError) as ambiguous:
                raise self._ambiguous(verdict, where) from ambiguous
        self._note(error, where)

    def _note(self, error: Exception, where: str) -> None:
        validate.note_user_error(error, self.stage, where)

    def _ambiguous(self, verdict: Any, where: str) -> Exception:
        return validate.ambiguous_verdict(verdict, self.stage, where)

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
        self.window = FilterWindow(check, stage)  # it counts the elements judged, and dropped

    def next(self) -> Any:
        keep, parent = self.predicate, self.parent
        left, dropped = self.window.left, self.window.dropped
        while True:  # the hot loop: the predicate inline, the error paths in helpers
            element = parent.next()
            if element is None:
                self.window.left, self.window.dropped = left, dropped
                return element
            try:
                kept = validate.verdict_truth(keep(element))
            except Exception as error:
                self._judge_each([element], error)
                raise
            left -= 1
            if not kept:
                dropped += 1
            if not left:
                self.window.left, self.window.dropped = WINDOW, 0
                self.window.full(dropped)
                left, dropped = WINDOW, 0
            if kept:
                self.window.left, self.window.dropped = left, dropped
                return element

    def _kept(self, taken: list[Any]) -> list[Any]:
        keep = self.predicate
        try:
            verdicts = [True if e is None else keep(e) for e in taken]
            if not all_bools(verdicts):
                verdicts = [validate.verdict_truth(v) for v in verdicts]
        except Exception as error:
            self._judge_each(taken, error)
            raise
        self._count(taken, verdicts)
        return list(itertools.compress(taken, verdicts))

    def _count(self, taken: list[Any], verdicts: list[bool]) -> None:
        """Adds judged elements (Nones are not judged) to the windows, judging each that fills."""
        judged = sum(map(operator.is_not, taken, itertools.repeat(None)))
        if judged < self.window.left:  # the usual case: no window fills
            self.window.left -= judged
            self.window.dropped += verdicts.count(False)
            return
        if judged < len(taken):
            verdicts = [v for e, v in zip(taken, verdicts) if e is not None]
        start, left = 0, self.window.left
        while len(verdicts) - start >= left:
            dropped = self.window.dropped + left - sum(verdicts[start : start + left])
            start += left
            self.window.left, self.window.dropped, left = WINDOW, 0, WINDOW
            self.window.full(dropped)
        self.window.dropped += len(verdicts) - start - sum(verdicts[start:])
        self.window.left -= len(verdicts) - start


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
