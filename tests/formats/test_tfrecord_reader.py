"""read_record and TFRecordReader: TFRecord records one at a time from an open file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from grainfn._src.formats.tfrecord import frame, write_tfrecords
from grainfn._src.formats.tfrecord_reader import TFRecordReader, read_record


def test_read_record_reads_one_record_and_stops_at_the_end() -> None:
    file = io.BytesIO(frame(b"") + frame(b"xyz"))
    assert read_record(file) == b""
    assert file.tell() == 16  # an empty record is its 16 framing bytes
    assert read_record(file) == b"xyz"
    with pytest.raises(StopIteration):
        read_record(file)
    assert file.tell() == 16 + 19


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (5, "a record header needs 12 bytes there, but the file ends 5 bytes"),
        (12 + 2, "a record of 4 data bytes needs 20 bytes there, but the file ends 14 bytes"),
        (19, "a record of 4 data bytes needs 20 bytes there, but the file ends 19 bytes"),
    ],
)
def test_a_truncated_record_leaves_the_file_at_its_start(cut: int, message: str) -> None:
    file = io.BytesIO(b"abc" + frame(b"data")[:cut])
    file.seek(3)
    prefix = "TFRecord file '<BytesIO>' is truncated at byte 3: "
    with pytest.raises(ValueError, match=prefix + message):
        read_record(file)
    assert file.tell() == 3


def test_a_length_whose_checksum_differs_is_corrupt_and_moves_nothing() -> None:
    damaged = bytearray(frame(b"data"))
    damaged[0] ^= 1
    file = io.BytesIO(bytes(damaged))
    with pytest.raises(ValueError, match="is corrupt at byte 0: the checksum of its length field"):
        read_record(file)
    assert file.tell() == 0


def test_a_named_file_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(frame(b"data")[:-1])
    with open(path, "rb") as file, pytest.raises(ValueError, match=f"TFRecord file '{path}'"):
        read_record(file)


def test_the_reader_tells_seeks_and_iterates(tmp_path: Path) -> None:
    path = write_tfrecords(tmp_path / "x.tfrecord", [b"a", b"bc", b"def"])
    reader = TFRecordReader(Path(path))
    assert iter(reader) is reader
    assert reader.tell() == 0
    assert next(reader) == b"a"
    second = reader.tell()
    assert list(reader) == [b"bc", b"def"]
    reader.seek(second)
    assert next(reader) == b"bc"
    reader.close()
    reader.close()  # closing twice is fine
    with pytest.raises(ValueError, match="closed file"):
        next(reader)


def test_a_subclass_may_read_any_file_object_it_sets_as_reader() -> None:
    class InMemory(TFRecordReader):
        def __init__(self, data: bytes) -> None:
            self._reader = io.BytesIO(data)

    assert list(InMemory(frame(b"p") + frame(b"q"))) == [b"p", b"q"]


def test_what_is_not_a_tfrecord_file_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"must be a str or os\.PathLike, got 3"):
        TFRecordReader(3)
    with pytest.raises(FileNotFoundError, match=r"none\.tfrecord"):
        TFRecordReader(tmp_path / "none.tfrecord")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="fifo"):
        TFRecordReader(fifo)
