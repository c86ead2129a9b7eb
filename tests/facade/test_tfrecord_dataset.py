"""Grain's `tfrecord_dataset` module's facade class: TFRecordIterDataset's states.

Its iterator's get_state and set_state (through JSON and Orbax), the file fingerprints
in a state, and its repr. The records it reads, the framing, checksums and errors of the
core TFRecord stream, are tested in tests/formats/test_tfrecord.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
import pytest

import grainfn
import grainfn.checkpoint
from grainfn._src.formats.tfrecord import write_tfrecords
from grainfn.experimental import TFRecordIterDataset


def write(folder: Path, records: list[bytes], name: str = "data.tfrecord") -> str:
    return str(write_tfrecords(str(folder / name), records))


def test_resuming_does_not_read_the_records_before(tmp_path: Path) -> None:
    records = [b"first", b"second", b"third"]
    path = write(tmp_path, records)
    it = iter(TFRecordIterDataset(path))
    assert next(it) == b"first"
    saved = it.get_state()
    with open(path, "r+b") as file:  # wreck the first record's header
        file.write(b"\xff" * 12)
    with pytest.raises(ValueError, match="corrupt at byte 0"):
        list(TFRecordIterDataset(path))
    again = iter(TFRecordIterDataset(path))
    with pytest.raises(ValueError, match="changed"):  # the state's fingerprint of the file
        again.set_state(saved)
    del saved["files"]  # a state without fingerprints is not checked against the files
    again.set_state(saved)
    assert list(again) == [b"second", b"third"]


def test_a_state_of_another_file_is_refused(tmp_path: Path) -> None:
    one, two = write(tmp_path, [b"1"], "one.tfrecord"), write(tmp_path, [b"1"], "two.tfrecord")
    it = iter(TFRecordIterDataset(one))
    with pytest.raises(ValueError, match=r"another pipeline: .*one\.tfrecord.*two\.tfrecord"):
        iter(TFRecordIterDataset(two)).set_state(it.get_state())


def test_checking_the_data_does_not_change_states(tmp_path: Path) -> None:
    path = write(tmp_path, [b"a", b"b", b"c"])
    it = iter(TFRecordIterDataset(path, verify_data_crc=True))
    next(it)
    plain = iter(TFRecordIterDataset(path))
    plain.set_state(json.loads(json.dumps(it.get_state())))
    assert list(plain) == [b"b", b"c"]
    assert repr(TFRecordIterDataset(path)) == f"IterDataset:\n  tfrecord({path!r})"


def test_orbax_checkpoints_the_position(tmp_path: Path) -> None:
    records = [f"record {i}".encode() for i in range(40)]
    path = write(tmp_path, records)
    make: Callable[[], Any] = lambda: TFRecordIterDataset(path).batch(3)  # noqa: E731
    it = iter(make())
    [next(it) for _ in range(5)]
    with ocp.CheckpointManager(tmp_path / "checkpoints") as manager:
        manager.save(5, args=grainfn.checkpoint.CheckpointSave(it))
        manager.wait_until_finished()
    with ocp.CheckpointManager(tmp_path / "checkpoints") as manager:
        restored = manager.restore(5, args=grainfn.checkpoint.CheckpointRestore(iter(make())))
    assert [list(batch) for batch in restored] == [list(b) for b in list(make())[5:]]
