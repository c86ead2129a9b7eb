"""Tests for grainfn._src.loader.operations: a DataLoader's operations as functions of records."""

import pickle

import numpy as np
import pytest

from grainfn._src.loader import operations as ops
from grainfn._src.loader.records import Record, RecordMetadata


def double(x: int) -> int:
    return 2 * x


def record(data: object, index: int = 4) -> Record[object]:
    return Record(RecordMetadata.seeded(index=index, record_key=9, key=index), data)


def test_map_keeps_the_metadata_and_names_the_function() -> None:
    mapped = ops.RecordMap(double)(record(3))
    assert mapped == record(6)
    assert ops.RecordMap(double).display_name == "Map double"


def draw(x: int, rng: np.random.Generator) -> int:
    return int(rng.integers(10**6))


def pair(index: int, x: str) -> tuple[int, str]:
    return index, x


def test_random_map_draws_from_the_records_generator() -> None:
    expected = int(RecordMetadata.seeded(4, 9, 4).rng.integers(10**6))
    assert ops.RecordRandomMap(draw)(record(0)).data == expected
    assert ops.RecordRandomMap(draw).display_name == "RandomMap draw"


def test_index_map_sees_the_sampler_index() -> None:
    assert ops.RecordIndexMap(pair)(record("a", index=7)).data == (7, "a")
    assert ops.RecordIndexMap(pair).display_name == "MapWithIndex pair"


def test_filter_answers_with_a_bool() -> None:
    keep = ops.RecordFilter(lambda x: x)
    assert keep(record([1])) is True
    assert keep(record([])) is False


def test_flat_map_numbers_its_parts_by_index_times_max_fan_out() -> None:
    parts = ops.RecordFlatMap(list, max_fan_out=3)(record("ab", index=5))
    assert parts == [Record(RecordMetadata(15), "a"), Record(RecordMetadata(16), "b")]
    assert ops.RecordFlatMap(list, 3).display_name == "FlatMap list, max_fan_out=3"


def test_batch_keeps_the_last_records_metadata_without_key() -> None:
    batch = ops.RecordBatch()([record({"b": 1, "a": 2}, 1), record({"b": 3, "a": 4}, 2)])
    assert batch.metadata == RecordMetadata.seeded(2, None, 2)
    assert list(batch.data) == ["a", "b"]  # sorted, as Grain's DataLoader batches
    assert batch.data["a"].tolist() == [2, 4]
    assert ops.RecordBatch(sum)([record(1), record(2)]).data == 3
    assert ops.RecordBatch().display_name == "Batch"
    assert ops.RecordBatch(sum).display_name == "Batch sum"


def test_dataloader_batches_raise_value_errors_and_legacy_batches_type_errors() -> None:
    different = [record({"a": 1}), record({"b": 1})]
    with pytest.raises(ValueError, match="different structure"):
        ops.RecordBatch()(different)
    with pytest.raises(TypeError, match="different structure"):
        ops.RecordBatch(legacy=True)(different)


def test_stack_sorted_and_stack_legacy_sort_dict_keys() -> None:
    elements = [{"b": 1, "a": 2}, {"b": 3, "a": 4}]
    for stack in (ops.stack_sorted, ops.stack_legacy):
        stacked = stack(elements)
        assert list(stacked) == ["a", "b"]
        assert stacked["b"].tolist() == [1, 3]


def test_operations_pickle_for_worker_processes() -> None:
    for operation in (ops.RecordMap(double), ops.RecordFlatMap(list, 2), ops.RecordBatch()):
        assert pickle.loads(pickle.dumps(operation)) == operation
