"""Tests for grainfn._src.python.dataset.sources.tfrecord_dataset.

Grain's TFRecord reader path (MaxText), against Grain 0.2.18.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn
import grainfn.experimental
from grainfn.fn import write_tfrecords

pytestmark = pytest.mark.grain


RECORDS = [b"first", b"", bytes(range(256)) * 12, b"x" * 70, b"last record"]
"""Records of every size class: empty, short, one longer than a read-ahead of 1 KiB."""


@pytest.fixture
def tfrecord_file(tmp_path: Path) -> str:
    return write_tfrecords(tmp_path / "data.tfrecord", RECORDS)


def read_to_end(reader: Any) -> tuple[list[bytes], list[int]]:
    """Every record `reader` returns and the `tell()` before each read, up to StopIteration."""
    records, offsets = [], [reader.tell()]
    while True:
        try:
            records.append(next(reader))
        except StopIteration:
            return records, offsets
        offsets.append(reader.tell())


def test_tfrecord_reader_reads_a_file_as_grains_does(tfrecord_file: str) -> None:
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    mine, grains = ours._TFRecordReader(tfrecord_file), theirs._TFRecordReader(tfrecord_file)
    assert read_to_end(mine) == read_to_end(grains)
    assert mine.tell() == grains.tell() == Path(tfrecord_file).stat().st_size
    offset = read_to_end(ours._TFRecordReader(tfrecord_file))[1][2]
    mine.seek(offset)
    grains.seek(offset)
    assert next(mine) == next(grains) == RECORDS[2]
    mine.close()
    with pytest.raises(ValueError, match="closed file"):
        next(mine)


def test_tfrecord_dataset_iterator_keeps_grains_state(tfrecord_file: str) -> None:
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    def run(module: Any) -> tuple[Any, ...]:
        it = module._TFRecordDatasetIterator(tfrecord_file)
        head = [next(it), next(it)]
        state = it.get_state()
        rest = list(it)
        it.set_state(state)
        return head, state, rest, next(it)

    assert run(ours) == run(theirs)
    assert run(ours)[1] == {"reader_offset": len(b"first") + 16 + 16}
    assert issubclass(ours._TFRecordDatasetIterator, grainfn.DatasetIterator)
    assert ours.TFRecordIterDataset is grainfn.experimental.TFRecordIterDataset


def test_tfrecord_dataset_iterator_refuses_a_state_that_is_not_an_offset(
    tfrecord_file: str,
) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    it = ours._TFRecordDatasetIterator(tfrecord_file)
    with pytest.raises(ValueError, match=r"\{'reader_offset': n\}, n an integer >= 0, got"):
        it.set_state({"reader_offset": -3})
    with pytest.raises(ValueError, match=re.escape("got {'next_index': 2}")):
        it.set_state({"next_index": 2})
    assert next(it) == RECORDS[0]  # nothing moved
    it.close()


def test_a_damaged_record_names_the_file_and_offset_and_moves_nothing(tmp_path: Path) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    whole = Path(write_tfrecords(tmp_path / "whole.tfrecord", [b"ab", b"cde"])).read_bytes()
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(whole[:-2])  # the second record (at byte 18) lacks 2 bytes
    reader = ours._TFRecordReader(cut)
    assert next(reader) == b"ab"
    message = f"TFRecord file '{cut}' is truncated at byte 18: a record of 3 data bytes"
    with pytest.raises(ValueError, match=message):
        next(reader)
    assert reader.tell() == 18
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(b"\x05" + whole[1:])  # a length field that its checksum does not match
    with pytest.raises(ValueError, match="is corrupt at byte 0: the checksum of its length"):
        next(ours._TFRecordReader(bad))


def cloud_storage_classes(tfrecord_dataset: Any, base_iterator: type, store: dict) -> Any:
    """MaxText's way to read TFRecord files from Cloud Storage, with `store` as the bucket.

    As MaxText does: a reader subclass that skips its parent's constructor (which
    opens a local file) and puts a blob's file object in `_reader`; an iterator
    subclass that initialises Grain's `DatasetIterator` itself and takes that
    reader; a `TFRecordIterDataset` subclass whose `__iter__` returns that
    iterator for `self._path`; and a factory picking it for `gs://` paths.
    """

    class BlobReader(tfrecord_dataset._TFRecordReader):
        def __init__(self, path: str) -> None:
            self._reader = io.BytesIO(store[path])

    class BlobIterator(tfrecord_dataset._TFRecordDatasetIterator):
        def __init__(self, path: str) -> None:
            base_iterator.__init__(self)
            self._reader = BlobReader(path)

    class BlobDataset(tfrecord_dataset.TFRecordIterDataset):
        def __iter__(self) -> Any:
            return BlobIterator(self._path)

    def make(path: str) -> Any:
        if path.startswith("gs://"):
            return BlobDataset(path)
        return tfrecord_dataset.TFRecordIterDataset(path)

    return BlobDataset, make


def test_maxtext_reads_cloud_storage_through_subclasses_as_with_grain(tmp_path: Path) -> None:
    import grain
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    local = write_tfrecords(tmp_path / "local.tfrecord", [b"l0", b"l1", b"l2"])
    store = {
        "gs://bucket/a": Path(write_tfrecords(tmp_path / "a", [b"a0", b"a1"])).read_bytes(),
        "gs://bucket/b": Path(write_tfrecords(tmp_path / "b", RECORDS)).read_bytes(),
    }
    paths = ["gs://bucket/a", local, "gs://bucket/b"]

    def run(library: Any, module: Any) -> tuple[Any, ...]:
        blob_dataset, make = cloud_storage_classes(module, library.DatasetIterator, store)
        it = iter(blob_dataset("gs://bucket/b"))
        first = next(it)
        state = it.get_state()
        rest = list(it)
        it.set_state(state)
        files = library.MapDataset.source(paths).map(make)
        mixed = library.experimental.InterleaveIterDataset(files, cycle_length=2)
        return first, state, rest, next(it), list(mixed.map(len))

    mine = run(grainfn, ours)
    assert mine == run(grain, theirs)
    assert mine[3] == RECORDS[1]


def test_maxtext_cloud_storage_pipeline_resumes_from_its_state(tmp_path: Path) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    store = {"gs://bucket/b": Path(write_tfrecords(tmp_path / "b", RECORDS)).read_bytes()}
    blob_dataset, _ = cloud_storage_classes(ours, grainfn.DatasetIterator, store)
    ds = blob_dataset("gs://bucket/b").map(len)
    it = iter(ds)
    assert [next(it), next(it)] == [5, 0]
    state = it.get_state()
    rest = list(it)
    again = iter(ds)
    again.set_state(state)
    assert list(again) == rest == [3072, 70, 11]


def test_numpy_records_survive_the_reader(tmp_path: Path) -> None:
    """MaxText parses tf.train.Example bytes from the reader: bytes come back bit for bit."""
    from grainfn._src.python.dataset.sources.tfrecord_dataset import _TFRecordReader

    arrays = [np.arange(n, dtype=np.float32) for n in (0, 1, 1000)]
    path = write_tfrecords(tmp_path / "arrays.tfrecord", [a.tobytes() for a in arrays])
    read = [np.frombuffer(r, np.float32) for r in _TFRecordReader(path)]
    assert all(np.array_equal(a, b) for a, b in zip(arrays, read, strict=True))
