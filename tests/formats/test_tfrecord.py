"""The core TFRecord stream, read through TFRecordIterDataset: framing, checksums, resuming, errors.

The facade's own states (get_state, set_state, Orbax) are tested in
tests/facade/test_tfrecord_dataset.py.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn
from grainfn import fn
from grainfn._src.formats.tfrecord import (
    TFRecordPosition,
    crc32c,
    frame,
    masked_crc32c,
    tfrecord,
    write_tfrecords,
)
from grainfn.experimental import TFRecordIterDataset
from grainfn.testing import assert_resumable

# The first record of a file tf.io.TFRecordWriter wrote (Grain's test data): b"1".
# Length 1, its masked CRC, the data, its masked CRC.
TENSORFLOW_RECORD_1 = bytes.fromhex("0100000000000000 0175de41 31 c30c4ad6")

RECORDS = st.lists(st.binary(max_size=300), max_size=12)


def bitwise_crc32c(data: bytes) -> int:
    """CRC-32C one bit at a time: the definition, with no table, as the reference."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def offsets(records: list[bytes]) -> list[int]:
    """The offset of each record's start, and of the end of the file."""
    out = [0]
    for record in records:
        out.append(out[-1] + len(record) + 16)
    return out


def write(folder: str | Path, records: list[bytes], name: str = "data.tfrecord") -> str:
    return write_tfrecords(os.path.join(folder, name), records)


def test_crc32c_matches_the_standard_check_values() -> None:
    # RFC 3720 (iSCSI), appendix B.4, and the usual "123456789" check value.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    assert crc32c(b"") == 0


@given(st.binary(max_size=3000), st.integers(0, 3))
def test_crc32c_of_any_bytes_and_alignment_is_the_bitwise_one(data: bytes, skip: int) -> None:
    # Lengths around 1024-byte blocks, and memoryviews that start mid-buffer.
    assert crc32c(data) == bitwise_crc32c(data)
    assert crc32c(memoryview(data)[skip:]) == bitwise_crc32c(data[skip:])


def test_crc32c_across_block_boundaries() -> None:
    data = bytes((i * 7 + 3) % 256 for i in range(4100))
    for n in (63, 64, 1023, 1024, 1025, 1026, 1027, 1028, 2048, 2051, 4100):
        assert crc32c(data[:n]) == bitwise_crc32c(data[:n]), n


def test_framing_is_tensorflows() -> None:
    assert frame(b"1") == TENSORFLOW_RECORD_1
    rotated = ((0xE3069283 >> 15) | (0xE3069283 << 17)) & 0xFFFFFFFF
    assert masked_crc32c(b"123456789") == (rotated + 0xA282EAD8) % 2**32
    assert frame(bytearray(b"ab")) == frame(memoryview(b"ab")) == frame(b"ab")


@given(RECORDS)
def test_reads_back_what_was_written(records: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(folder, records)
        assert os.path.getsize(path) == offsets(records)[-1]
        assert list(TFRecordIterDataset(path)) == records
        assert list(TFRecordIterDataset(path, verify_data_crc=True)) == records
        assert list(fn.iterate(tfrecord(Path(path)))) == records


@given(RECORDS)
def test_the_state_is_the_next_offset_and_resumes_at_every_record(records: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(folder, records)
        it = fn.iterate(tfrecord(path))
        states = [it.state] + [it.state for _ in it]
        assert states == [TFRecordPosition(offset) for offset in offsets(records)]
        for k, state in enumerate(states):
            assert list(fn.iterate(tfrecord(path), state)) == records[k:]
        assert_resumable(
            lambda: tfrecord(path), max_elements=len(records), resume_points=len(records) + 1
        )


def test_records_longer_than_a_read_chunk(tmp_path: Path) -> None:
    big = bytes(range(256)) * 9000  # 2.3 MB: more than the 1 MiB read at a time
    records = [b"a" * 1000, big, b"", big[:1_048_000], b"z"] + [b"x" * 700] * 3000
    path = write(tmp_path, records)
    assert list(TFRecordIterDataset(path, verify_data_crc=True)) == records
    it = fn.iterate(tfrecord(path), TFRecordPosition(offsets(records)[3]))
    assert next(it) == big[:1_048_000]
    assert it.state == TFRecordPosition(offsets(records)[4])


def test_an_empty_file_has_no_records(tmp_path: Path) -> None:
    path = write(tmp_path, [])
    assert os.path.getsize(path) == 0
    assert list(TFRecordIterDataset(path)) == []
    it = fn.iterate(tfrecord(path))
    assert list(it) == [] and it.state == TFRecordPosition(0)
    assert tfrecord(path).step(TFRecordPosition(0)) == (fn.END, TFRecordPosition(0))


def test_a_truncated_record_names_the_file_and_its_offset(tmp_path: Path) -> None:
    records = [b"ok", b"fine", b"cut short here"]
    whole = b"".join(frame(r) for r in records)
    start = offsets(records)[2]
    for cut in range(start + 1, len(whole)):
        path = tmp_path / "cut.tfrecord"
        path.write_bytes(whole[:cut])
        it = iter(TFRecordIterDataset(path))
        assert [next(it), next(it)] == records[:2]
        what = "a record header" if cut - start < 12 else "a record of 14 data bytes"
        message = (
            f"TFRecord file '{path}' is truncated at byte {start}: {what} needs "
            f"{12 if cut - start < 12 else 30} bytes there, but the file ends {cut - start} "
            "bytes later"
        )
        for _ in range(2):  # a failed read moves nothing: the next one fails the same way
            with pytest.raises(ValueError, match="^" + message.replace(".", r"\.")):
                next(it)
            assert it.get_state()["state"] == {"kind": "TFRecordPosition", "offset": start}


def test_a_corrupt_length_is_always_found_and_corrupt_data_on_request(tmp_path: Path) -> None:
    records = [b"head", b"payload", b"tail"]
    start = offsets(records)[1]
    whole = bytearray(b"".join(frame(r) for r in records))
    data = bytearray(whole)
    data[start + 12 + 2] ^= 0x01  # a bit of "payload"
    path = tmp_path / "data.tfrecord"
    path.write_bytes(data)
    assert list(TFRecordIterDataset(path)) == [b"head", b"paxload", b"tail"]  # as Grain reads it
    it = iter(TFRecordIterDataset(path, verify_data_crc=True))
    assert next(it) == b"head"
    with pytest.raises(ValueError, match=f"is corrupt at byte {start}: the checksum of its 7 data"):
        next(it)
    length = bytearray(whole)
    length[start] = 9  # the length field says 9
    path.write_bytes(length)
    with pytest.raises(
        ValueError,
        match=(
            rf"^TFRecord file '{path}' is corrupt at byte {start}: the checksum of its length "
            r"field \(9\) is 0x[0-9a-f]{8}, but 0x[0-9a-f]{8} is stored\."
        ),
    ):
        list(TFRecordIterDataset(path))


def test_a_state_from_the_middle_of_a_record_is_refused_when_read(tmp_path: Path) -> None:
    path = write(tmp_path, [b"abc", b"def"])
    it = iter(TFRecordIterDataset(path))
    saved = it.get_state()
    saved["state"]["offset"] = 5
    it.set_state(saved)  # it is inside the file, so only reading can tell
    with pytest.raises(ValueError, match=r"corrupt at byte 5.*not the start of a record"):
        next(it)
    saved["state"]["offset"] = 39
    with pytest.raises(
        ValueError, match=r"offset=39\) is past the end of TFRecord file .*38 bytes"
    ):
        it.set_state(saved)


def test_bad_paths_records_and_options_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tfrecord"
    with pytest.raises(FileNotFoundError, match=r"missing\.tfrecord"):
        list(TFRecordIterDataset(missing))
    with pytest.raises(TypeError, match=r"must be a str or os\.PathLike, got 3 of type int"):
        TFRecordIterDataset(3)
    with pytest.raises(ValueError, match="path is the empty string"):
        tfrecord("")
    with pytest.raises(TypeError, match="verify_data_crc must be True or False, got 'yes'"):
        tfrecord("x.tfrecord", verify_data_crc="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Record 1 is 'text' of type str.*text\.encode"):
        write_tfrecords(tmp_path / "x.tfrecord", [b"ok", "text"])


def test_a_closed_cursor_refuses_to_read_on(tmp_path: Path) -> None:
    path = write(tmp_path, [b"a"])
    cursor = tfrecord(path).open(TFRecordPosition(0))
    cursor.close()
    with pytest.raises(ValueError, match=r"cursor over .* is closed"):
        cursor.next()
    assert cursor.state() == TFRecordPosition(0)


def test_pickles_and_reads_in_worker_processes(tmp_path: Path) -> None:
    records = [bytes([i % 256]) * (i % 50) for i in range(300)]
    path = write(tmp_path, records)
    stream = tfrecord(path, verify_data_crc=True)
    assert pickle.loads(pickle.dumps(stream)) == stream
    ds = TFRecordIterDataset(path).map(lambda record: (len(record), record[:1]))
    assert list(cloudpickle.loads(cloudpickle.dumps(ds))) == list(ds)
    expected = [(len(r), r[:1]) for r in records]
    for workers in (0, 2):
        options = grainfn.MultiprocessingOptions(num_workers=workers)
        with iter(ds.mp_prefetch(options)) as it:
            head = [next(it) for _ in range(123)]
            saved = it.get_state()
            assert head + list(it) == expected
        with iter(ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=1))) as again:
            again.set_state(saved)
            assert list(again) == expected[123:]
