"""Map-level stages that compute elements: map, random_map, map_with_index, filter, batch.

User functions see each element once per position; `None` (a filtered-out
position) passes through them untouched, as in Grain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grainfn._src import tree, validate
from grainfn._src.dataset import Dataset, OneParent, ParentIndex, function_name, set_length
from grainfn._src.index import slicing
from grainfn._src.index.rng import ElementRng


@dataclasses.dataclass(frozen=True, repr=False)
class MappedDataset(OneParent):
    """`fn(element)` for every element."""

    fn: Callable[[Any], Any]

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(element)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn = self.fn
        return [None if e is None else fn(e) for e in self.parent._get_many(indices)]

    def describe_stage(self) -> str:
        return f"map({function_name(self.fn)})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


@dataclasses.dataclass(frozen=True, repr=False)
class RandomMappedDataset(OneParent):
    """`fn(element, rng)` where `rng` depends only on (seed, index)."""

    fn: Callable[[Any, np.random.Generator], Any]
    seed: int
    rngs: ElementRng = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)
        object.__setattr__(self, "rngs", ElementRng(self.seed))

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(element, self.rngs.at(index))
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn, at = self.fn, self.rngs.at
        elements = self.parent._get_many(indices)
        return [None if e is None else fn(e, at(i)) for e, i in zip(elements, indices.tolist())]

    def describe_stage(self) -> str:
        return f"random_map({function_name(self.fn)}, seed={self.seed})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


@dataclasses.dataclass(frozen=True, repr=False)
class IndexMappedDataset(OneParent):
    """`fn(index, element)` for every element."""

    fn: Callable[[int, Any], Any]

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(index, element)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn = self.fn
        elements = self.parent._get_many(indices)
        return [None if e is None else fn(i, e) for e, i in zip(elements, indices.tolist())]

    def describe_stage(self) -> str:
        return f"map_with_index({function_name(self.fn)})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


@dataclasses.dataclass(frozen=True, repr=False)
class FilteredDataset(OneParent):
    """Keeps elements where `predicate(element)` is true and puts None elsewhere."""

    predicate: Callable[[Any], Any]
    makes_holes = True

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

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

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


@dataclasses.dataclass(frozen=True, repr=False)
class BatchedDataset(OneParent):
    """Consecutive elements of each epoch, batched; epochs are batched separately."""

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None

    def __post_init__(self) -> None:
        parent_length = self.parent.length
        if self.drop_remainder:
            set_length(self, parent_length // self.batch_size)
        else:
            set_length(self, -(-parent_length // self.batch_size))

    def _bounds(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parent_length = self.parent.length
        slicing.check_addressable(int(indices.max()), self.length, parent_length)
        epoch, offset = np.divmod(indices, self.length)
        start = offset * self.batch_size
        # parent_length - start cannot overflow where start + batch_size can.
        size = np.minimum(self.batch_size, parent_length - start)
        first = start + epoch * parent_length
        return first, first + size

    def _get(self, index: int) -> Any:
        return self._get_many(np.array([index], dtype=np.int64))[0]

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        starts, stops = self._bounds(indices)
        sizes = stops - starts
        ends = np.cumsum(sizes)
        # All parent positions of the block in one array: start of each batch
        # repeated over its size, plus the offset inside the batch.
        offsets = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - sizes, sizes)
        elements = self.parent._get_many(np.repeat(starts, sizes) + offsets)
        make = self.batch_fn or tree.stack
        return [make(elements[e - s : e]) for s, e in zip(sizes.tolist(), ends.tolist())]

    def describe_stage(self) -> str:
        extra = ", drop_remainder=True" if self.drop_remainder else ""
        fn = f", batch_fn={function_name(self.batch_fn)}" if self.batch_fn else ""
        return f"batch({self.batch_size}{extra}{fn})"

    def trace_parent(self, index: int) -> ParentIndex:
        """The first parent index of the batch, and the batch's size."""
        starts, stops = self._bounds(np.array([index], dtype=np.int64))
        return ParentIndex(0, int(starts[0]), int(stops[0] - starts[0]))


def upstream_holes(ds: Dataset[Any]) -> Dataset[Any] | None:
    """The nearest stage above `ds` that leaves None holes (a filter or a flat_map), if any.

    A map-level batch cannot follow one: its batches would come out short.
    """
    to_visit = [ds]
    while to_visit:
        node = to_visit.pop()
        if node.makes_holes:
            return node
        to_visit.extend(node.parents)
    return None
