"""Grain's file-format datasets, each a thin wrapper over a core stream."""

from __future__ import annotations

import os
from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.facade.datasets import IterDataset
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.formats.parquet import parquet
from grainfn._src.formats.tfrecord import tfrecord
from grainfn._src.formats.tfrecord_reader import TFRecordReader


class ParquetIterDataset(IterDataset[dict[str, Any]]):
    """The rows of Parquet files, one dict per row: Grain's `experimental.ParquetIterDataset`.

    A row maps each column name to the row's entry of the column converted
    with pyarrow's `to_numpy()` a row group at a time, as in Grain (numpy
    scalars for numbers, `str` and `bytes` for text and binary, arrays for
    lists). Several files are read 16 at a time, one row from each in turn.
    An iterator's state is the row group and the row in it, so restoring it
    reads from that row group on; Grain's own state (`{"row_group": g,
    "index_within_row_group": r}`, in an interleave's for several files) is
    read too. Needs pyarrow (`pip install "grainfn[parquet]"`).

    Args:
        path: A Parquet file (a local path or a URI pyarrow understands), or a
            sequence of them.
        **read_kwargs: Keyword arguments for `pyarrow.parquet.ParquetFile`.

    Examples:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = os.path.join(folder.name, "data.parquet")
        >>> pq.write_table(pa.table({"x": [1, 2, 3]}), file, row_group_size=2)
        >>> it = iter(ParquetIterDataset(file).map(lambda row: int(row["x"]) * 10))
        >>> next(it), next(it)
        (10, 20)
        >>> saved = it.get_state()
        >>> list(it)
        [30]
        >>> it.set_state(saved)
        >>> next(it)
        30
        >>> folder.cleanup()
    """

    def __init__(self, path: Any, **read_kwargs: Any) -> None:
        super().__init__()
        self._core = parquet(path, **read_kwargs)  # checks the paths
        self._paths = [path] if isinstance(path, (str, bytes, os.PathLike)) else list(path)
        self._read_kwargs = read_kwargs

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Reads only the files `paths[sl]` from now on (in place, as Grain's does).

        Grain's workers and threads use it to split the files between them;
        `sequential_slice` is accepted and, as in Grain, changes nothing here.
        """
        del sequential_slice
        if not isinstance(sl, slice):
            raise TypeError(f"set_slice takes a slice of the file list, got {sl!r}.")
        self._paths = self._paths[sl]
        if not self._paths:
            raise ValueError(
                f"set_slice({sl!r}) leaves no file to read; ParquetIterDataset reads at least one."
            )
        self._core = parquet(self._paths, **self._read_kwargs)


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
