"""Tests for grainfn._src.loader.legacy: Grain's legacy operations on iterators of records."""

import numpy as np
import pytest

from grainfn._src.loader.legacy import (
    BatchOperation,
    FilterOperation,
    MapOperation,
    RandomMapOperation,
)
from grainfn._src.loader.records import Record, RecordMetadata


def records(*datas: object) -> list[Record[object]]:
    return [
        Record(RecordMetadata.seeded(index=10 + i, record_key=i, key=i), data)
        for i, data in enumerate(datas)
    ]


def plus_one(x: int) -> int:
    return x + 1


def test_map_drops_the_record_key_and_keeps_index_and_generator() -> None:
    out = list(MapOperation(plus_one)(iter(records(1, 2))))
    assert [r.data for r in out] == [2, 3]
    assert [r.metadata for r in out] == [
        RecordMetadata.seeded(10, None, 0),
        RecordMetadata.seeded(11, None, 1),
    ]


def test_random_map_draws_from_the_records_own_generator() -> None:
    def draw(x: int, rng: np.random.Generator) -> int:
        return int(rng.integers(1000))

    out = [r.data for r in RandomMapOperation(draw)(iter(records(0, 0)))]
    expected = [int(RecordMetadata.seeded(10 + i, i, i).rng.integers(1000)) for i in range(2)]
    assert out == expected


def test_filter_keeps_the_records_whose_condition_holds() -> None:
    out = list(FilterOperation(lambda x: x % 2 == 0)(iter(records(1, 2, 3, 4))))
    assert [(r.metadata.index, r.data, r.metadata.record_key) for r in out] == [
        (11, 2, None),
        (13, 4, None),
    ]


def broken(x: int) -> int:
    raise KeyError("missing")


def test_errors_in_user_functions_name_the_function_and_the_sampler_index() -> None:
    message = (
        r"^The map_function broken raised KeyError: 'missing' \(the record at sampler index 10\)"
    )
    with pytest.raises(ValueError, match=message):
        list(MapOperation(broken)(iter(records(1))))
    with pytest.raises(ValueError, match=r"condition_function broken.*sampler index 10"):
        list(FilterOperation(broken)(iter(records(1))))


def test_batches_carry_the_last_records_metadata_and_keep_or_drop_the_remainder() -> None:
    out = list(BatchOperation(2)(iter(records(1, 2, 3))))
    assert [r.data.tolist() for r in out] == [[1, 2], [3]]
    assert [r.metadata for r in out] == [
        RecordMetadata.seeded(11, None, 1),
        RecordMetadata.seeded(12, None, 2),
    ]
    dropped = list(BatchOperation(2, drop_remainder=True)(iter(records(1, 2, 3))))
    assert [r.data.tolist() for r in dropped] == [[1, 2]]
    summed = BatchOperation(3, batch_fn=sum)(iter(records(1, 2, 3, 4)))
    assert [r.data for r in summed] == [6, 4]


def test_batching_different_structures_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="different structure"):
        list(BatchOperation(2)(iter(records({"a": 1}, {"b": 2}))))


def test_bad_batch_arguments_are_refused_when_built() -> None:
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        BatchOperation(0)
    with pytest.raises(TypeError, match="drop_remainder"):
        BatchOperation(2, drop_remainder="yes")  # type: ignore[arg-type]
