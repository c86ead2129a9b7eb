"""Grain's `tfrecord_dataset` source: TFRecordIterDataset and its iterator over the file."""

from __future__ import annotations

from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.facade.dataset import DatasetIterator, IterDataset
from grainfn._src.formats.tfrecord import tfrecord
from grainfn._src.formats.tfrecord_reader import TFRecordReader


class TFRecordIterDataset(IterDataset[bytes]):
    """The records of a TFRecord file, as `bytes`: Grain's `experimental.TFRecordIterDataset`.

    An iterator's state is the byte offset of the next record, so restoring
    it seeks there (Grain's own state, `{"reader_offset": n}`, is read too).
    The length's checksum of every record is checked, and with
    `verify_data_crc=True` (grainfn's option) the data's checksum too; a
    truncated or corrupt record is a ValueError naming the file and the offset.

    The path is the attribute `_path`, as in Grain. A subclass with its own
    `__iter__` (MaxText's, which returns a `TFRecordFileIterator` over a Cloud
    Storage blob) is read through that `__iter__`, in a pipeline too.

    Args:
        path: A local, uncompressed TFRecord file.
        verify_data_crc: Also check each record's data checksum.

    Examples:
        >>> import os, tempfile
        >>> from grainfn.fn import write_tfrecords
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = write_tfrecords(os.path.join(folder.name, "x.tfrecord"), [b"a", b"bb", b"c"])
        >>> it = iter(TFRecordIterDataset(file).map(len))
        >>> next(it)
        1
        >>> saved = it.get_state()
        >>> list(it)
        [2, 1]
        >>> it.set_state(saved)
        >>> next(it)
        2
        >>> folder.cleanup()
    """

    def __init__(self, path: Any, *, verify_data_crc: bool = False) -> None:
        super().__init__()
        self._core = tfrecord(path, verify_data_crc=verify_data_crc)  # checks the path
        self._path = self._core.path
        if type(self).__iter__ is not IterDataset.__iter__:
            self._core = None  # a subclass that iterates by itself: read through its __iter__


class TFRecordFileIterator(DatasetIterator[bytes]):
    """The records of one TFRecord file, through a reader: Grain's `_TFRecordDatasetIterator`.

    `next` returns the next record of the `TFRecordReader` in the attribute
    `_reader`, as in Grain, so a subclass may set another reader there (MaxText
    sets one over a Cloud Storage blob). The state is Grain's:
    `{"reader_offset": n}`, the byte offset of the next record. A
    `TFRecordIterDataset` does not iterate with this class (its iterator reads
    through the core stream); it is here for code that uses or subclasses
    Grain's internal iterator.

    Args:
        path: A local, uncompressed TFRecord file.

    Examples:
        >>> import os, tempfile
        >>> from grainfn.fn import write_tfrecords
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = write_tfrecords(os.path.join(folder.name, "x.tfrecord"), [b"a", b"bc"])
        >>> it = TFRecordFileIterator(file)
        >>> next(it), it.get_state()
        (b'a', {'reader_offset': 17})
        >>> list(it)
        [b'bc']
        >>> it.set_state({"reader_offset": 17})
        >>> next(it)
        b'bc'
        >>> it.close()
        >>> folder.cleanup()
    """

    _reader: TFRecordReader

    def __init__(self, path: Any) -> None:
        super().__init__()
        self._reader = TFRecordReader(path)

    def __next__(self) -> bytes:
        return next(self._reader)

    def get_state(self) -> dict[str, Any]:
        """`{"reader_offset": n}`: the byte offset of the next record."""
        return {"reader_offset": self._reader.tell()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Reads on from the record at `state["reader_offset"]`.

        Raises:
            ValueError: if `state` is not `{"reader_offset": n}` with n an integer >= 0.
        """
        offset = state.get("reader_offset") if isinstance(state, dict) else None
        if not records.is_saved_count(offset):
            raise ValueError(
                "A TFRecord iterator's state is {'reader_offset': n}, n an integer >= 0, got "
                f"{validate.short_repr(state)}."
            )
        self._reader.seek(offset)

    def close(self) -> None:
        """Closes the file; `next` then raises ValueError."""
        self._reader.close()
