"""A DataLoader's operations as functions of records, and Grain's legacy operation classes.

Each transformation becomes a plain function of a `Record` that applies the
user's method to the record's data and keeps its metadata: `RandomMap` draws
from the record's generator, `MapWithIndex` sees the record's sampler index,
`Batch` keeps the last record's metadata, and `FlatMap` numbers its parts
`index * max_fan_out + j`, as Grain's DataLoader does. The functions are
frozen records, so they pickle to worker processes and name themselves in the
pipeline description.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core import pytree as tree
from grainfn._src.core.dataset import function_name
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn._src.stages.batch import sorted_keys


@dataclasses.dataclass(frozen=True)
class RecordMap:
    """`Record(meta, fn(data))`."""

    fn: Callable[[Any], Any]

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return f"Map {function_name(self.fn)}"

    def __call__(self, record: Record[Any]) -> Record[Any]:
        """The mapped record."""
        return Record(record.metadata, self.fn(record.data))


@dataclasses.dataclass(frozen=True)
class RecordRandomMap:
    """`Record(meta, fn(data, meta.rng))`: draws from the record's own generator."""

    fn: Callable[[Any, Any], Any]

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return f"RandomMap {function_name(self.fn)}"

    def __call__(self, record: Record[Any]) -> Record[Any]:
        """The mapped record."""
        meta = record.metadata
        return Record(meta, self.fn(record.data, meta.rng))


@dataclasses.dataclass(frozen=True)
class RecordIndexMap:
    """`Record(meta, fn(meta.index, data))`: sees the record's sampler index."""

    fn: Callable[[int, Any], Any]

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return f"MapWithIndex {function_name(self.fn)}"

    def __call__(self, record: Record[Any]) -> Record[Any]:
        """The mapped record."""
        meta = record.metadata
        return Record(meta, self.fn(meta.index, record.data))


@dataclasses.dataclass(frozen=True)
class RecordFilter:
    """Whether `fn(data)` keeps the record."""

    fn: Callable[[Any], Any]

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return f"Filter {function_name(self.fn)}"

    def __call__(self, record: Record[Any]) -> bool:
        """Whether to keep the record."""
        return bool(self.fn(record.data))


@dataclasses.dataclass(frozen=True)
class RecordFlatMap:
    """The parts of `fn(data)`, each a record numbered `index * max_fan_out + j`."""

    fn: Callable[[Any], Sequence[Any]]
    max_fan_out: int

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return f"FlatMap {function_name(self.fn)}, max_fan_out={self.max_fan_out}"

    def __call__(self, record: Record[Any]) -> list[Record[Any]]:
        """The parts of the record."""
        first = record.metadata.index * self.max_fan_out
        return [
            Record(RecordMetadata(first + j), part) for j, part in enumerate(self.fn(record.data))
        ]


def stack_legacy(elements: Sequence[Any]) -> Any:
    """Grain's legacy `BatchOperation` stacking: elements of other structures are a TypeError.

    The elements are stacked as by a batch (`pytree.stack`), but a leaf where
    another element has a subtree is refused too (`strict`), and every
    structure mismatch is a TypeError, as Grain's legacy operation raises
    (its `Batch` transformation and datasets raise ValueError); the message
    names the path where the structures differ. Dict keys come out sorted,
    as Grain's (`stack_sorted`).

    Examples:
        >>> stack_legacy([[1, 2], [3, 4]])
        [array([1, 3]), array([2, 4])]
        >>> stack_legacy([{"a": 1}, {"b": 2}])
        Traceback (most recent call last):
        ...
        TypeError: Cannot batch elements of different structure at the top level: element 0 is a
        dict with keys ['a'] but element 1 is a dict with keys ['b'].
    """
    try:
        return sorted_keys(tree.stack(elements, strict=True), elements[0])
    except tree.StructureError as error:
        raise TypeError(str(error)) from None


def stack_sorted(elements: Sequence[Any]) -> Any:
    """`pytree.stack` with the batch's dict keys sorted: a DataLoader `Batch`, as Grain's.

    Examples:
        >>> stack_sorted([{"b": 1, "a": 2}, {"b": 3, "a": 4}])
        {'a': array([2, 4]), 'b': array([1, 3])}
    """
    return sorted_keys(tree.stack(elements), elements[0])


@dataclasses.dataclass(frozen=True)
class RecordBatch:
    """One record of the batched data, with the last record's metadata minus its key.

    Without a `batch_fn` the data is stacked with its dict keys sorted, as
    Grain's DataLoader batches (`stack_sorted`), and a `batch_fn`'s batches
    are kept as it makes them. `legacy` stacks as Grain's legacy
    `BatchOperation` (`stack_legacy`) when there is no `batch_fn`; it does not
    change the pipeline's description.
    """

    batch_fn: Callable[[Sequence[Any]], Any] | None = None
    legacy: bool = False

    @property
    def display_name(self) -> str:
        """How the pipeline description names this operation."""
        return "Batch" if self.batch_fn is None else f"Batch {function_name(self.batch_fn)}"

    def __call__(self, records: Sequence[Record[Any]]) -> Record[Any]:
        """The batch of the records."""
        make = self.batch_fn or (stack_legacy if self.legacy else stack_sorted)
        return Record(records[-1].metadata.remove_record_key(), make([r.data for r in records]))
