"""The `flat_map` stage: every part of `fn(element)` for every element.

A stream yields all parts in order. A dataset keeps random access by giving each
element `max_fan_out` positions; positions past an element's last part are None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.dataset import INFINITE, OneParent, ParentIndex, function_name, set_length
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.stream import BaseCursor, Cursor, Stream, WrappingStream, element_before

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class FlatMappedDataset(OneParent):
    """Split `j` of parent element `k` at position `k * max_fan_out + j`; None past the last."""

    device_refusal = (
        "flat_map makes a varying number of elements per position, and leaves empty "
        "positions (None) where it makes fewer than max_fan_out"
    )

    fn: Callable[[Any], Sequence[Any]]
    max_fan_out: int
    makes_holes = True

    def __post_init__(self) -> None:
        parent_length = self.parent.length
        if parent_length > INFINITE // self.max_fan_out:
            set_length(self, INFINITE)
        else:
            set_length(self, parent_length * self.max_fan_out)

    def _get(self, index: int) -> Any:
        try:
            return self._get_many(np.array([index], dtype=np.int64))[0]
        except Exception:  # read the parent element alone: its error names its position
            self.parent._get(index // self.max_fan_out)
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        element_indices, split_indices = np.divmod(indices, self.max_fan_out)
        # Consecutive positions share parent elements: split each element once.
        unique, inverse = np.unique(element_indices, return_inverse=True)
        splits = [
            None if element is None else self._split(element, index)
            for element, index in zip(self.parent._get_many(unique), unique.tolist())
        ]
        out = []
        for which, split in zip(inverse.tolist(), split_indices.tolist()):
            parts = splits[which]
            out.append(parts[split] if parts is not None and split < len(parts) else None)
        return out

    def _split(self, element: Any, index: int) -> Sequence[Any]:
        try:
            parts = self.fn(element)
            if not isinstance(parts, Sequence):
                parts = list(parts)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"parent position {index}")
            raise
        if len(parts) > self.max_fan_out:
            raise ValueError(
                f"flat_map {function_name(self.fn)} split the element at parent index {index} "
                f"into {len(parts)} parts, more than max_fan_out={self.max_fan_out}. Raise "
                "max_fan_out, or flat_map the stream instead, which needs no bound."
            )
        return parts

    def describe_stage(self) -> str:
        return f"flat_map({function_name(self.fn)}, max_fan_out={self.max_fan_out})"

    def trace_parent(self, index: int) -> ParentIndex:
        """The parent element whose split `index % max_fan_out` this position holds."""
        return ParentIndex(0, index // self.max_fan_out)


@records.register(former_names=("SplitState",))  # its former name, in states saved before
class FlatMapState(NamedTuple, Generic[records.Parent]):
    """State of a stream `flat_map`: parts of the current element taken, and the state before it."""

    taken: int
    parent: records.Parent


@dataclasses.dataclass(frozen=True, repr=False)
class FlatMappedStream(WrappingStream[Any, FlatMapState[Any]]):
    """Every part of `fn(element)` for every element, in order.

    The state is the parent's state before the element being split and the
    number of its parts already passed on, so it never holds data.
    """

    fn: Callable[[Any], Sequence[Any]]
    record = FlatMapState
    grain_state = GrainKeys(
        "FlatMapIterDataset", FlatMapState, (("next_index_in_buffer", "taken"),)
    )

    def open(self, state: FlatMapState) -> Cursor:
        return _FlatMapCursor(self.parent.open(state.parent), state, self.fn, self.describe_stage())

    def describe_stage(self) -> str:
        return f"flat_map({function_name(self.fn)})"


class _FlatMapCursor(BaseCursor):
    def __init__(
        self, parent: Cursor, state: Any, fn: Callable[[Any], Sequence[Any]], stage: str
    ) -> None:
        self.parent = parent
        self.fn, self.stage = fn, stage
        self.before = state.parent  # the parent's state before the element in `parts`
        self.parts: Sequence[Any] = ()
        self.offset = 0
        if state.taken:
            try:
                self._split_next()
            except StopIteration:  # a state at the end (as Grain writes it): nothing is left
                return
            self.offset = state.taken

    def _split_next(self) -> None:
        self.before = self.parent.state()
        element = self.parent.next()
        self.offset = 0
        if element is None:
            self.parts = (None,)
            return
        try:
            parts = self.fn(element)
            self.parts = parts if isinstance(parts, Sequence) else list(parts)
        except Exception as error:
            validate.note_user_error(error, self.stage, element_before(self.parent))
            raise

    def next(self) -> Any:
        while self.offset >= len(self.parts):
            self._split_next()
        part = self.parts[self.offset]
        self.offset += 1
        return part

    def state(self) -> FlatMapState:
        if self.offset >= len(self.parts):
            return FlatMapState(0, self.parent.state())
        return FlatMapState(self.offset, self.before)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@toolz.curry
def flat_map(
    fn: Callable[[Any], Sequence[Any]], data: Data, *, max_fan_out: int | None = None
) -> Data:
    """Every element of `fn(element)` for every element.

    A stream yields all parts in order. A dataset keeps random access by giving
    each element `max_fan_out` positions: part `j` of element `k` sits at
    position `k * max_fan_out + j`, and positions past an element's last part
    are None (skipped when read as a stream).

    Examples:
        >>> from grainfn.fn import from_dataset, range
        >>> ds = flat_map(lambda x: [x] * x, range(3), max_fan_out=2)
        >>> ds.get_many([0, 1, 2, 3, 4, 5])
        [None, None, 1, None, 2, 2]
        >>> from grainfn.fn import iterate
        >>> list(iterate(flat_map(lambda x: [x] * x, from_dataset(range(4)))))
        [1, 2, 2, 3, 3, 3]
    """
    validate.check_callable(fn, "flat_map fn")
    if isinstance(data, Stream):
        if max_fan_out is not None:
            validate.check_positive_int(max_fan_out, "max_fan_out", validate.INT64_MAX)
        return FlatMappedStream(data, fn)
    ds = as_dataset(data, "flat_map")
    if max_fan_out is None:
        raise ValueError(
            "flat_map on a dataset needs max_fan_out, the most parts one element may give: "
            "each element gets that many positions. A stream needs no bound."
        )
    fan_out = validate.check_positive_int(max_fan_out, "max_fan_out", validate.INT64_MAX)
    return FlatMappedDataset(ds, fn, fan_out)
