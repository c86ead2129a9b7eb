"""TFRecord records read one at a time from an open binary file: Grain's `_TFRecordReader`.

`grainfn.experimental.TFRecordIterDataset` reads through the buffered cursor of
`tfrecord.py`, which opens a local file by its path. This module reads the same
framing (see `tfrecord.py`) from any binary file object with `read`, `seek`,
`tell` and `close`, a record per call, as Grain's internal `_TFRecordReader`
does. Code written for Grain subclasses that reader to read files it opens
itself (MaxText opens Cloud Storage blobs), so the file object is the
attribute `_reader`, as in Grain, and reading uses nothing else.

As in the cursor, the length's checksum of every record is checked (Grain
checks none), and a record that fails to read raises ValueError naming the
file and the byte offset of the record, leaving the file where the record
starts.
"""

from __future__ import annotations

from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.file_kinds import check_regular_file
from grainfn._src.formats.tfrecord import (
    _FOOTER,
    _HEADER,
    _length_crc,
    corrupt_error,
    truncated_error,
)


def read_record(file: Any) -> bytes:
    """The data of the record that starts at `file`'s position; the position moves past it.

    Args:
        file: A binary file object with `read`, `seek` and `tell`.

    Returns:
        The record's data.

    Raises:
        StopIteration: if the file ends where a record would start.
        ValueError: if the file ends inside the record or the checksum of its
            length is not the one stored; the position is then back at the
            record's start.

    Examples:
        >>> import io
        >>> from grainfn._src.formats.tfrecord import frame
        >>> file = io.BytesIO(frame(b"ab") + frame(b"c"))
        >>> read_record(file), file.tell(), read_record(file)
        (b'ab', 18, b'c')
        >>> read_record(io.BytesIO(frame(b"ab")[:-1]))
        Traceback (most recent call last):
        ...
        ValueError: TFRecord file '<BytesIO>' is truncated at byte 0: a record of 2 data bytes ...
    """
    start = file.tell()
    header = file.read(_HEADER.size)
    if not header:
        raise StopIteration
    if len(header) < _HEADER.size:
        file.seek(start)
        raise truncated_error(_name(file), start, "a record header", _HEADER.size, len(header))
    length, length_crc = _HEADER.unpack(header)
    if length_crc != _length_crc(length):
        file.seek(start)
        what = f"its length field ({length})"
        raise corrupt_error(_name(file), start, what, length_crc, _length_crc(length))
    rest = file.read(length + _FOOTER.size)
    if len(rest) < length + _FOOTER.size:
        file.seek(start)
        need, have = _HEADER.size + length + _FOOTER.size, _HEADER.size + len(rest)
        raise truncated_error(_name(file), start, f"a record of {length} data bytes", need, have)
    return bytes(rest[:length])


def _name(file: Any) -> str:
    name = getattr(file, "name", None)
    return name if isinstance(name, str) else f"<{type(file).__name__}>"


class TFRecordReader:
    """The records of a TFRecord file, one per `next`, from an open file: Grain's `_TFRecordReader`.

    `next(reader)` returns the next record's data as `bytes` and raises
    StopIteration at the end of the file; `tell()` is the byte offset of the
    next record and `seek(offset)` goes back to an offset `tell()` returned.
    The file object is the attribute `_reader`, as in Grain: a subclass may
    skip this constructor and set `_reader` to any binary file object with
    `read`, `seek`, `tell` and `close` (MaxText reads Cloud Storage blobs so).
    `close()`, or dropping the reader, closes it.

    Args:
        path: A local, uncompressed TFRecord file (a `str` or `os.PathLike`).

    Raises:
        TypeError: if `path` is neither.
        FileNotFoundError: if no file is there.
        ValueError: if what is there is not a regular file (a FIFO, a device).

    Examples:
        >>> import os, tempfile
        >>> from grainfn.fn import write_tfrecords
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = write_tfrecords(os.path.join(folder.name, "x.tfrecord"), [b"a", b"bc"])
        >>> reader = TFRecordReader(file)
        >>> next(reader), reader.tell()
        (b'a', 17)
        >>> list(reader)
        [b'bc']
        >>> reader.seek(17)
        >>> next(reader)
        b'bc'
        >>> reader.close()
        >>> folder.cleanup()
    """

    _reader: Any

    def __init__(self, path: Any) -> None:
        name = validate.check_path(path, "TFRecord")
        check_regular_file(name, "TFRecord")  # a FIFO would block the open
        self._reader = open(name, "rb")  # noqa: SIM115 (closed in close and __del__)

    def __iter__(self) -> TFRecordReader:
        return self

    def __next__(self) -> bytes:
        return read_record(self._reader)

    def seek(self, offset: int) -> None:
        """Reads on from byte `offset`, the start of a record (an offset `tell()` returned)."""
        self._reader.seek(offset)

    def tell(self) -> int:
        """The byte offset of the next record."""
        return int(self._reader.tell())

    def close(self) -> None:
        """Closes the file; `next` then raises ValueError."""
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.close()

    def __del__(self) -> None:
        self.close()
