"""write_array_records: round trips, shard layout, argument checks (the codec: test_codec.py)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn._src.formats.array_record.writer import shard_paths
from grainfn.sources import (
    ArrayRecordDataSource,
    decode_array,
    write_array_records,
)


@pytest.mark.parametrize("num_shards", [1, 2, 3, 7])
def test_bytes_round_trip_in_the_order_written(tmp_path: Path, num_shards: int) -> None:
    records = [bytes([i % 256]) * (i % 13) for i in range(50)]  # includes empty records
    paths = write_array_records(records, tmp_path / "bytes", num_shards=num_shards)
    assert len(paths) == num_shards
    assert ArrayRecordDataSource(paths).__getitems__(range(50)) == records
    glob = ArrayRecordDataSource(str(tmp_path / f"bytes-*-of-{num_shards:05d}.array_record"))
    assert list(glob) == records


def test_shards_are_contiguous_blocks_of_nearly_equal_size(tmp_path: Path) -> None:
    paths = write_array_records([b"%d" % i for i in range(10)], tmp_path / "split", num_shards=4)
    assert [list(ArrayRecordDataSource(p)) for p in paths] == [
        [b"0", b"1", b"2"],
        [b"3", b"4", b"5"],
        [b"6", b"7"],
        [b"8", b"9"],
    ]


@pytest.mark.parametrize("num_shards", [1, 3])
def test_arrays_round_trip_through_decode_array(tmp_path: Path, num_shards: int) -> None:
    arrays = [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
        np.array(7, dtype=np.uint8),
        np.zeros((0, 5), dtype=np.int16),
        np.array(["ab", "c"]),
        np.array([True, False]),
        np.float64(2.5),  # a numpy scalar is stored as a 0-d array
        np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")]),
    ]
    paths = write_array_records(arrays, tmp_path / "arrays", num_shards=num_shards)
    source = ArrayRecordDataSource(paths)
    for expected, record in zip(arrays, source, strict=True):
        got = decode_array(record)
        assert got.dtype == np.asarray(expected).dtype
        assert got.shape == np.shape(expected)
        np.testing.assert_array_equal(got, expected)
        assert got.flags.writeable
        # The records are plain .npy files: numpy reads them too.
        np.testing.assert_array_equal(np.load(io.BytesIO(record), allow_pickle=False), expected)
    assert decode_array(source[1]).flags.f_contiguous


def test_a_generator_is_streamed_to_one_shard_and_counted_for_several(tmp_path: Path) -> None:
    def generate() -> Iterator[bytes]:
        yield from (b"g%d" % i for i in range(7))

    one = write_array_records(generate(), tmp_path / "gen")
    assert list(ArrayRecordDataSource(one)) == [b"g%d" % i for i in range(7)]
    three = write_array_records(generate(), tmp_path / "gen", num_shards=3)
    assert list(ArrayRecordDataSource(three)) == [b"g%d" % i for i in range(7)]
    rows = write_array_records(np.arange(6).reshape(3, 2), tmp_path / "rows", num_shards=2)
    decoded = [decode_array(r).tolist() for r in ArrayRecordDataSource(rows)]
    assert decoded == [[0, 1], [2, 3], [4, 5]]


def test_shard_names_and_parent_directories(tmp_path: Path) -> None:
    assert shard_paths("a/b.array_record", 1) == ["a/b-00000-of-00001.array_record"]
    assert shard_paths(Path("x"), 2) == [
        "x-00000-of-00002.array_record",
        "x-00001-of-00002.array_record",
    ]
    assert shard_paths("x", 123456)[-1] == "x-123455-of-123456.array_record"
    paths = write_array_records([b"z"], tmp_path / "new" / "deeper" / "z")
    assert paths == [str(tmp_path / "new" / "deeper" / "z-00000-of-00001.array_record")]
    assert os.path.isfile(paths[0])


def test_group_size_one_is_the_default_unless_options_set_it(tmp_path: Path) -> None:
    from array_record.python import array_record_module

    def writer_options(path: str) -> str:
        reader = array_record_module.ArrayRecordReader(path)
        try:
            return str(reader.writer_options_string())
        finally:
            reader.close()

    default = write_array_records([b"a"], tmp_path / "default")[0]
    assert "group_size:1," in writer_options(default)
    zstd = write_array_records([b"a"], tmp_path / "zstd", options="zstd:5")[0]
    assert "group_size:1," in writer_options(zstd) and "zstd:5" in writer_options(zstd)
    grouped = write_array_records([b"a", b"b"], tmp_path / "grouped", options="group_size:64")[0]
    assert "group_size:64," in writer_options(grouped)
    assert list(ArrayRecordDataSource(grouped)) == [b"a", b"b"]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_shards": 0}, ValueError, "num_shards must be a positive integer, got 0"),
        ({"num_shards": 2.0}, TypeError, "num_shards must be a positive integer, got 2.0"),
        ({"num_shards": True}, TypeError, "num_shards must be a positive integer, got True"),
        ({"options": "group_size:lots"}, ValueError, "rejects the writer options 'group_size:lo"),
        ({"options": {"group_size": 1}}, TypeError, "options must be an array_record writer"),
    ],
)
def test_bad_arguments_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        write_array_records([b"a"], tmp_path / "bad", **kwargs)
    assert not list(tmp_path.glob("bad*"))


def test_bad_records_are_refused_and_partial_files_removed(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"Record 3 is 'text' of type str; records must be bytes"):
        write_array_records([b"a", b"b", b"c", "text"], tmp_path / "mixed", num_shards=2)
    with pytest.raises(TypeError, match=r"records must be an iterable of records .* got bytes"):
        write_array_records(b"abc", tmp_path / "mixed")
    with pytest.raises(TypeError, match="array of Python objects"):
        write_array_records([np.array([None])], tmp_path / "mixed")
    assert not list(tmp_path.iterdir())


class Liar:
    """An iterable whose len() is wrong."""

    def __init__(self, items: list[bytes], length: int) -> None:
        self.items, self.length = items, length

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.items)


def test_an_iterable_with_a_wrong_len_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="records ended after 3 records, before the number"):
        write_array_records(Liar([b"a"] * 3, 5), tmp_path / "liar", num_shards=2)
    with pytest.raises(ValueError, match="yielded more than the 2 records its len"):
        write_array_records(Liar([b"a"] * 3, 2), tmp_path / "liar", num_shards=2)
    assert not list(tmp_path.iterdir())


def test_an_unwritable_path_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "taken-00000-of-00001.array_record").mkdir()
    with pytest.raises(OSError, match=r"Cannot write the ArrayRecord file .*taken-00000-of-00001"):
        write_array_records([b"a"], tmp_path / "taken")
