"""Tests for grainfn._src.loader.pack_and_batch: Grain's legacy PackAndBatchOperation on records."""

from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src.loader.pack_and_batch import packed_record
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn.testing import assert_elements_equal


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"length_struct": {"x": 0}, "batch_size": 2}, ValueError, r"length_struct\['x'\] must"),
        ({"length_struct": {"x": None}, "batch_size": 2}, TypeError, "a positive int, got None"),
        ({"length_struct": {"x": True}, "batch_size": 2}, TypeError, "positive int, got True"),
        ({"length_struct": {}, "batch_size": 2}, ValueError, "at least one leaf"),
        ({"length_struct": {"x": 3}, "batch_size": 0}, ValueError, "batch_size must be"),
        (
            {"length_struct": {"x": 3}, "batch_size": 2, "max_sequences_per_bin": 0},
            ValueError,
            "max_sequences_per_bin must be",
        ),
    ],
)
def test_bad_arguments_are_refused_when_built(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        grain.experimental.PackAndBatchOperation(**kwargs)


def records(datas: list[Any]) -> list[Record[Any]]:
    return [
        Record(RecordMetadata.seeded(index=10 + i, record_key=i, key=i), data)
        for i, data in enumerate(datas)
    ]


def test_the_operation_on_records_keeps_the_last_records_metadata_without_key() -> None:
    op = grain.experimental.PackAndBatchOperation({"x": 4}, batch_size=2)
    datas = [{"x": np.arange(n)} for n in (3, 2, 4, 1, 2)]
    out = list(op(iter(records(datas))))
    assert [r.metadata for r in out] == [
        RecordMetadata.seeded(11, None, 1),
        RecordMetadata.seeded(14, None, 4),
    ]
    assert [r.data[1]["x"].tolist() for r in out] == [
        [[1, 1, 1, 0], [1, 1, 0, 0]],
        [[1, 1, 1, 1], [1, 2, 2, 0]],
    ]
    # Each call packs afresh (Grain's operation keeps its last batch between calls).
    assert_elements_equal([r.data for r in op(iter(records(datas)))], [r.data for r in out])
    assert list(op(iter([]))) == []


def test_bad_elements_are_refused_while_reading() -> None:
    op = grain.experimental.PackAndBatchOperation({"x": 3, "y": 2}, batch_size=2)
    too_long = records([{"x": np.arange(2), "y": np.arange(1)}, {"x": np.arange(4), "y": [1]}])
    with pytest.raises(ValueError, match=r"element\['x'\] has length 4, more than length_struct"):
        list(op(iter(too_long)))
    extra = records([{"x": np.arange(2), "y": [1], "z": [2]}])
    with pytest.raises(ValueError, match=r"expected a dict with keys \["):
        list(op(iter(extra)))
    nested = grain.experimental.PackAndBatchOperation({"a": (3, 2)}, batch_size=1)
    with pytest.raises(ValueError, match=r"at element\['a'\] expected a sequence of 2, got"):
        list(nested(iter(records([{"a": (np.arange(2),)}]))))


def test_packed_record_keeps_the_last_records_metadata_without_its_key() -> None:
    last = Record(RecordMetadata.seeded(index=7, record_key=3, key=5), "data")
    packed = packed_record(last, "batch")
    assert packed == Record(RecordMetadata.seeded(7, None, 5), "batch")
