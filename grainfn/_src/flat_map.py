"""flat_map: one element in, a sequence of elements out, as a dataset and as a stream.

A dataset needs a bound on the fan-out to keep random access: position `i`
reads split `i % max_fan_out` of parent element `i // max_fan_out`, and is None
where an element has fewer splits. A stream has no such bound: it yields every
split of every element in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grainfn._src import state as records
from grainfn._src.dataset import INFINITE, OneParent, ParentIndex, function_name, set_length
from grainfn._src.stream import BaseCursor, Cursor
from grainfn._src.stream_ops import WrappingStream


@dataclasses.dataclass(frozen=True, repr=False)
class FlatMappedDataset(OneParent):
    """Split `j` of parent element `k` at position `k * max_fan_out + j`; None past the last."""

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
        return self._get_many(np.array([index], dtype=np.int64))[0]

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
        parts = self.fn(element)
        if not isinstance(parts, Sequence):
            parts = list(parts)
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


@dataclasses.dataclass(frozen=True, repr=False)
class FlatMappedStream(WrappingStream):
    """Every part of `fn(element)` for every element, in order.

    The state is the parent's state before the element being split and the
    number of its parts already passed on, so it never holds data.
    """

    fn: Callable[[Any], Sequence[Any]]
    record = records.SplitState

    def open(self, state: Any) -> Cursor:
        return _FlatMapCursor(self.parent.open(state.parent), state, self.fn)

    def describe_stage(self) -> str:
        return f"flat_map({function_name(self.fn)})"


class _FlatMapCursor(BaseCursor):
    def __init__(self, parent: Cursor, state: Any, fn: Callable[[Any], Sequence[Any]]) -> None:
        self.parent = parent
        self.fn = fn
        self.before = state.parent  # the parent's state before the element in `parts`
        self.parts: Sequence[Any] = ()
        self.offset = 0
        if state.taken:
            self._split_next()
            self.offset = state.taken

    def _split_next(self) -> None:
        self.before = self.parent.state()
        element = self.parent.next()
        self.offset = 0
        if element is None:
            self.parts = (None,)
            return
        parts = self.fn(element)
        self.parts = parts if isinstance(parts, Sequence) else list(parts)

    def next(self) -> Any:
        while self.offset >= len(self.parts):
            self._split_next()
        part = self.parts[self.offset]
        self.offset += 1
        return part

    def state(self) -> records.SplitState:
        if self.offset >= len(self.parts):
            return records.SplitState(0, self.parent.state())
        return records.SplitState(self.offset, self.before)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)
