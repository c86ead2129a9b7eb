"""Writing records to ArrayRecord shard files that read back in the order written."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sized
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.file_kinds import check_replaceable
from grainfn._src.formats.array_record.codec import encode_array

SUFFIX = ".array_record"
DEFAULT_WRITER_OPTIONS = "group_size:1"
"""One record per chunk: reading a record decodes only that record (what random access needs)."""


def shard_paths(path: str | os.PathLike[str], num_shards: int) -> list[str]:
    """The file names of `num_shards` shards: `{path}-00000-of-00002.array_record`, ...

    A trailing `.array_record` on `path` is dropped before the shard number is added.

    Examples:
        >>> shard_paths("data/train.array_record", 2)
        ['data/train-00000-of-00002.array_record', 'data/train-00001-of-00002.array_record']
    """
    num_shards = validate.check_positive_int(num_shards, "num_shards")
    base = os.fspath(path)
    if not isinstance(base, str) or not base:
        raise ValueError(f"path must be a non-empty file name (str or os.PathLike), got {path!r}.")
    base = base.removesuffix(SUFFIX)
    digits = max(5, len(str(num_shards)))
    return [f"{base}-{k:0{digits}d}-of-{num_shards:0{digits}d}{SUFFIX}" for k in range(num_shards)]


def write_array_records(
    records: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    num_shards: int = 1,
    options: str = DEFAULT_WRITER_OPTIONS,
) -> list[str]:
    """Writes `records` to ArrayRecord shard files and returns their paths.

    Records are split into `num_shards` contiguous blocks of nearly equal size
    (the first `len % num_shards` shards hold one record more), so that the
    shards read back in file order, e.g. by
    `ArrayRecordDataSource(write_array_records(...))` or by a glob of the
    shard names, give the records in the order they were written.

    Args:
        records: `bytes` (also `bytearray`, `memoryview`) or numpy arrays.
            Arrays are stored in numpy's `.npy` format (see `encode_array`);
            read them back with `decode_array`, e.g. `ds.map(decode_array)`.
            With several shards, an iterable without `len()` is first read
            into memory to count it; pass a sequence to stream it.
        path: The file name the shard names are made from: `name` or
            `name.array_record` gives `name-00000-of-00002.array_record`, ...
            Missing parent directories are created; existing files are replaced.
        num_shards: The number of files, >= 1. Shards beyond the number of
            records are valid files with no records.
        options: array_record writer options. `group_size:1` (one record per
            chunk, what random access needs) is added unless `options` sets a
            group size.

    Returns:
        The paths of the shard files, in order.

    Raises:
        TypeError: for a record that is neither bytes nor a numpy array.
        ValueError: for a bad `num_shards` or `options`, or if `records`
            yields a different number of records than its `len()`.
            Also if a shard's name is taken by a FIFO, a device or a socket:
            nothing is written then.
        OSError: if a file cannot be written (a directory at a shard's name
            is found before anything is written). Files already written by
            the call are removed.

    Examples:
        >>> import tempfile
        >>> from grainfn.sources import ArrayRecordDataSource
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     paths = write_array_records(
        ...         [b"a", b"b", b"c"], os.path.join(folder, "letters"), num_shards=2
        ...     )
        ...     print([os.path.basename(p) for p in paths])
        ...     with ArrayRecordDataSource(paths) as source:
        ...         print(source.__getitems__(range(len(source))))
        ['letters-00000-of-00002.array_record', 'letters-00001-of-00002.array_record']
        [b'a', b'b', b'c']
    """
    if isinstance(records, (str, bytes, bytearray, memoryview)) or not isinstance(
        records, Iterable
    ):
        raise TypeError(
            f"records must be an iterable of records (bytes or numpy arrays), got "
            f"{type(records).__name__}; to write one record, pass [record]."
        )
    paths = shard_paths(path, num_shards)
    options = _writer_options(options)
    for name in paths:
        check_replaceable(name, "ArrayRecord")
    if len(paths) == 1:
        sizes = None
    else:
        if not isinstance(records, Sized):
            records = list(records)
        total = len(records)
        sizes = [total // len(paths) + (k < total % len(paths)) for k in range(len(paths))]
    parent = os.path.dirname(paths[0])
    if parent:
        os.makedirs(parent, exist_ok=True)
    written: list[str] = []
    try:
        _write_shards(iter(records), paths, sizes, options, written)
    except BaseException:
        for name in written:
            with contextlib.suppress(OSError):
                os.remove(name)
        raise
    return paths


def _writer_options(options: Any) -> str:
    if not isinstance(options, str):
        raise TypeError(
            f"options must be an array_record writer options string such as "
            f"'group_size:1,zstd:3', got {options!r} of type {type(options).__name__}."
        )
    names = [item.split(":", 1)[0].strip() for item in options.split(",") if item.strip()]
    if "group_size" in names:
        return options
    return f"{DEFAULT_WRITER_OPTIONS},{options}" if names else DEFAULT_WRITER_OPTIONS


def _write_shards(
    records: Iterator[Any],
    paths: list[str],
    sizes: list[int] | None,
    options: str,
    written: list[str],
) -> None:
    from array_record.python import array_record_module

    position = 0
    for shard, name in enumerate(paths):
        try:
            writer = array_record_module.ArrayRecordWriter(name, options)
        except ValueError as error:
            raise ValueError(
                f"array_record rejects the writer options {options!r}: {error}."
            ) from None
        written.append(name)
        try:
            count = None if sizes is None else sizes[shard]
            if writer.ok():
                for record in records if count is None else _take(records, count, position):
                    writer.write(_as_bytes(record, position))
                    position += 1
        except BaseException:
            _close(writer, name, quietly=True)
            raise
        _close(writer, name, quietly=False)
    if sizes is not None and next(records, _END) is not _END:
        raise ValueError(
            f"records yielded more than the {position} records its len() announced; pass a "
            f"sequence, or an iterable whose len() is right."
        )


_END = object()


def _close(writer: Any, name: str, quietly: bool) -> None:
    try:
        writer.close()
    except RuntimeError as error:
        if not quietly:
            raise OSError(f"Cannot write the ArrayRecord file {name!r}: {error}") from None


def _take(records: Iterator[Any], count: int, start: int) -> Iterator[Any]:
    for k in range(count):
        record = next(records, _END)
        if record is _END:
            raise ValueError(
                f"records ended after {start + k} records, before the number its len() "
                f"announced; pass a sequence, or an iterable whose len() is right."
            )
        yield record


def _as_bytes(record: Any, position: int) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, (bytearray, memoryview)):
        return bytes(record)
    if isinstance(record, (np.ndarray, np.generic)):
        return encode_array(record)
    raise TypeError(
        f"Record {position} is {record!r} of type {type(record).__name__}; records must be "
        f"bytes (bytearray, memoryview) or numpy arrays. Encode text with str.encode and "
        f"other objects with a serialiser of your choice (pickle, protobuf, ...)."
    )
