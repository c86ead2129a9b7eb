"""grainfn's TFRecordIterDataset against Grain 0.2.18's on the same files.

The records are the same, and so is the position: grainfn's state holds the
byte offset that Grain's `{"reader_offset": n}` holds, and either state
continues both readers at the same record.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn
import grainfn.checkpoint
from grainfn._src.formats.tfrecord import frame, write_tfrecords

pytestmark = pytest.mark.grain

MIXED = [b"", b"a", b"\x00" * 12, bytes(range(256)) * 5000] + [b"r%d" % i for i in range(30)]
"""Empty records, bytes that look like headers, one record longer than a 1 MiB read."""


def grain_dataset(path: Any) -> Any:
    import grain

    return grain.experimental.TFRecordIterDataset(str(path))


def tensorflow_file() -> str:
    """The file Grain tests with, written by tf.io.TFRecordWriter (Morris sequence terms)."""
    import grain

    testdata = os.path.join(os.path.dirname(grain.__file__), "_src", "python", "testdata")
    return os.path.join(testdata, "morris_sequence_first_5.tfrecord")


def test_a_file_tensorflow_wrote_reads_the_same_and_our_writer_rewrites_it() -> None:
    path = tensorflow_file()
    ours = list(grainfn.experimental.TFRecordIterDataset(path, verify_data_crc=True))
    assert ours == list(grain_dataset(path)) == [b"1", b"1 1", b"2 1", b"1 2 1 1", b"1 1 1 2 2 1"]
    assert b"".join(frame(record) for record in ours) == Path(path).read_bytes()


@given(st.lists(st.binary(max_size=200), max_size=10))
def test_any_records_read_the_same(records: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write_tfrecords(os.path.join(folder, "x.tfrecord"), records)
        assert list(grainfn.experimental.TFRecordIterDataset(path)) == records
        assert list(grain_dataset(path)) == records


def test_states_hold_grains_offset_and_each_continues_the_other(tmp_path: Path) -> None:
    path = write_tfrecords(tmp_path / "mixed.tfrecord", MIXED)
    for k in range(len(MIXED) + 1):
        theirs = iter(grain_dataset(path))
        ours = iter(grainfn.experimental.TFRecordIterDataset(path))
        assert list(itertools.islice(ours, k)) == list(itertools.islice(theirs, k)) == MIXED[:k]
        grain_state, our_state = theirs.get_state(), ours.get_state()
        assert our_state["state"] == {
            "kind": "TFRecordPosition",
            "offset": grain_state["reader_offset"],
        }
        from_grain = iter(grainfn.experimental.TFRecordIterDataset(path))
        from_grain.set_state(grain_state)
        to_grain = iter(grain_dataset(path))
        to_grain.set_state({"reader_offset": our_state["state"]["offset"]})
        assert list(from_grain) == list(to_grain) == list(theirs) == list(ours) == MIXED[k:]


def test_a_pipeline_restores_from_grains_orbax_checkpoint(tmp_path: Path) -> None:
    import grain

    path = write_tfrecords(tmp_path / "mixed.tfrecord", MIXED)
    theirs = iter(grain_dataset(path).map(len).batch(4))
    [next(theirs) for _ in range(3)]
    with ocp.CheckpointManager(tmp_path / "grain") as manager:
        manager.save(3, args=grain.checkpoint.CheckpointSave(theirs))
        manager.wait_until_finished()
    ds = grainfn.experimental.TFRecordIterDataset(path).map(len).batch(4)
    with ocp.CheckpointManager(tmp_path / "grain") as manager:
        ours = manager.restore(3, args=grainfn.checkpoint.CheckpointRestore(iter(ds)))
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


def test_empty_and_truncated_files_as_in_grain(tmp_path: Path) -> None:
    empty = write_tfrecords(tmp_path / "empty.tfrecord", [])
    assert list(grainfn.experimental.TFRecordIterDataset(empty)) == list(grain_dataset(empty)) == []
    whole = b"".join(frame(r) for r in [b"kept", b"lost record"])
    for cut in (len(frame(b"kept")) + 5, len(whole) - 1):
        path = tmp_path / "cut.tfrecord"
        path.write_bytes(whole[:cut])
        for it in (iter(grainfn.experimental.TFRecordIterDataset(path)), iter(grain_dataset(path))):
            assert next(it) == b"kept"
            with pytest.raises(ValueError):  # both a ValueError; grainfn's names file and offset
                next(it)


def test_grains_mp_prefetch_without_workers_and_grainfns_with_them(tmp_path: Path) -> None:
    import grain

    path = write_tfrecords(tmp_path / "mixed.tfrecord", MIXED)
    theirs = list(grain_dataset(path).map(len).mp_prefetch(grain.MultiprocessingOptions(0)))
    ds = grainfn.experimental.TFRecordIterDataset(path).map(len)
    for workers in (0, 2):
        assert list(ds.mp_prefetch(grainfn.MultiprocessingOptions(workers))) == theirs


def test_interleaved_files_read_and_resume_as_in_grain(tmp_path: Path) -> None:
    import grain

    paths = [
        write_tfrecords(tmp_path / f"part-{k}.tfrecord", [b"%d-%d" % (k, i) for i in range(k + 2)])
        for k in range(5)
    ]

    def interleaved(module: Any) -> Any:
        files = module.MapDataset.source(paths).map(module.experimental.TFRecordIterDataset)
        return module.experimental.InterleaveIterDataset(files, cycle_length=2)

    expected = list(interleaved(grain))
    assert list(interleaved(grainfn)) == expected and len(expected) == 20
    for k in (0, 5, 13, 20):
        it = iter(interleaved(grainfn))
        head = list(itertools.islice(it, k))
        again = iter(interleaved(grainfn))
        again.set_state(it.get_state())
        assert head + list(again) == expected
