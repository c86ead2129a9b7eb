"""Grain's legacy operations (`grain.python.MapOperation`, ...): functions of record iterators.

A DataLoader takes them as the transformations they stand for (see
`grainfn._src.loader.pipeline`); called on an iterator of records, each
yields the records it makes, as Grain's do: the record key dropped, the
index and generator kept, and an error in the user's function raised as a
ValueError that names the function.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from grainfn._src.core import validate
from grainfn._src.core.dataset import function_name
from grainfn._src.loader.operations import stack_legacy
from grainfn._src.loader.records import Record


class Operation(Protocol):
    """What a legacy operation is: a function from an iterator of records to one."""

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """The records this operation makes of `input_iterator`'s."""
        ...


def _call(what: str, fn: Callable[..., Any], record: Record[Any], *args: Any) -> Any:
    try:
        return fn(record.data, *args)
    except Exception as error:
        raise ValueError(
            f"The {what} {function_name(fn)} raised {type(error).__name__}: {error} (the record "
            f"at sampler index {record.metadata.index})."
        ) from error


@dataclasses.dataclass(frozen=True)
class MapOperation:
    """Legacy: applies `map_function` to each record's data; prefer `transforms.Map`.

    Examples:
        >>> from grainfn._src.loader.records import RecordMetadata
        >>> records = [Record(RecordMetadata(0, record_key=3), 1)]
        >>> list(MapOperation(lambda x: x + 1)(iter(records)))
        [Record(metadata=RecordMetadata(index=0, record_key=None, rng=None), data=2)]
    """

    map_function: Callable[[Any], Any]

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """Each record mapped."""
        for record in input_iterator:
            data = _call("map_function", self.map_function, record)
            yield Record(record.metadata.remove_record_key(), data)


@dataclasses.dataclass(frozen=True)
class RandomMapOperation:
    """Legacy: `random_map_function(data, rng)` with the record's generator; prefer `RandomMap`."""

    random_map_function: Callable[[Any, Any], Any]

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """Each record mapped with its own generator."""
        for record in input_iterator:
            rng = record.metadata.rng
            data = _call("random_map_function", self.random_map_function, record, rng)
            yield Record(record.metadata.remove_record_key(), data)


@dataclasses.dataclass(frozen=True)
class FilterOperation:
    """Legacy: keeps records where `condition_function(data)`; prefer `transforms.Filter`."""

    condition_function: Callable[[Any], bool]

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """The records kept."""
        for record in input_iterator:
            if _call("condition_function", self.condition_function, record):
                yield Record(record.metadata.remove_record_key(), record.data)


@dataclasses.dataclass(frozen=True)
class BatchOperation:
    """Legacy: batches `batch_size` records; prefer `transforms.Batch`.

    Records whose data differ in structure are a TypeError, as in Grain's
    legacy operation (`stack_legacy`; `transforms.Batch` raises ValueError),
    in a DataLoader too; leaves of different shapes are a ValueError.

    Examples:
        >>> from grainfn._src.loader.records import RecordMetadata
        >>> records = [Record(RecordMetadata(i, record_key=i), i) for i in range(3)]
        >>> [r.data.tolist() for r in BatchOperation(2)(iter(records))]
        [[0, 1], [2]]
    """

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None

    def __post_init__(self) -> None:
        validate.check_positive_int(self.batch_size, "batch_size")
        validate.check_flag(self.drop_remainder, "BatchOperation drop_remainder")

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """The batches, each with the metadata of its last record (without its key)."""
        make = self.batch_fn or stack_legacy
        pending: list[Record[Any]] = []
        for record in input_iterator:
            pending.append(record)
            if len(pending) == self.batch_size:
                yield Record(record.metadata.remove_record_key(), make([r.data for r in pending]))
                pending = []
        if pending and not self.drop_remainder:
            last = pending[-1].metadata.remove_record_key()
            yield Record(last, make([r.data for r in pending]))
