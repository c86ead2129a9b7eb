"""`ArrayRecordDataSource`: the records of ArrayRecord files as one random-access source."""

from __future__ import annotations

import contextlib
import operator
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.formats.array_record import file_ranges as ranges_lib
from grainfn._src.formats.array_record import paths as paths_lib
from grainfn._src.formats.array_record import reader as reader_lib

_BLOCK = 1024  # records per read when iterating


class ArrayRecordDataSource:
    """The records of one or more ArrayRecord files, concatenated, as `bytes`.

    Record `i` of the source is record `i` of the first file, then of the
    second file, and so on: the order of `paths` (a glob pattern's files
    sorted by name). A single record (`source[i]`) is read in the calling
    thread (`seek` + `read`). A block of them (`source.__getitems__(indices)`,
    which pipelines call for their blocks of positions) is split by file; by
    default each file's part is fetched with one batched read on
    array_record's thread pool, so that reads waiting on storage overlap.

    That batched read has a fixed cost: array_record scans the file's whole
    chunk list and hands the work to its threads on every call (about 50 µs
    per call for a file of 20,000 records, growing with the file). When the
    files sit in memory (the page cache, tmpfs) or on a fast local disk,
    `parallel_reads=False`, which reads a block's records one after another
    in the calling thread, is several times faster; on network or cold
    storage, keep the default. The records are the same either way.

    Files are opened when the source is made (to count their records and to
    report a missing or corrupt file at once) and closed again; each process
    then opens them on its first read. A source pickles without its readers,
    so it can be sent to worker processes. `close()` closes the readers (a
    later read opens them again); a `with` block closes them at its end.
    Threads may share a source; reads of one file take turns.

    The `repr` names the files as they were given (and any reader options),
    so it is the same in every process and every run: pipeline descriptions,
    which checkpoints are checked against, show it.

    Args:
        paths: An ArrayRecord file, a glob pattern, or a sequence of files
            or patterns (`str` or `os.PathLike`).
        reader_options: Extra array_record reader options, as a dict of
            option names to values (as in Grain), added to the defaults
            `readahead_buffer_size:0,max_parallelism:0` (no read-ahead: what
            random access needs), e.g. `{"index_storage_option": "offloaded",
            "footer_prefetch_bytes": 0}` to keep the files' indices on disk.
            Turning read-ahead on makes every read a batched read.
        parallel_reads: Whether a block's records in one file are fetched
            with one batched read on array_record's threads (True) or one
            after another in the calling thread (False). See above.

    Raises:
        FileNotFoundError: if a file does not exist or a pattern matches nothing.
        ValueError: if `paths` is empty or names a directory, anything else
            but a regular file (a FIFO, a device: refused before any reader
            opens it), or a file that is not an ArrayRecord file, or if
            array_record rejects `reader_options`.
        TypeError: if `paths`, `reader_options` or `parallel_reads` has the wrong type.

    Examples:
        >>> import os, tempfile
        >>> import grainfn
        >>> from grainfn.sources import write_array_records
        >>> folder = tempfile.TemporaryDirectory()
        >>> records = [f"record {i}".encode() for i in range(10)]
        >>> paths = write_array_records(records, os.path.join(folder.name, "data"), num_shards=2)
        >>> source = ArrayRecordDataSource(os.path.join(folder.name, "data-*.array_record"))
        >>> len(source), source[7]
        (10, b'record 7')
        >>> source.__getitems__([9, 0, 5])
        [b'record 9', b'record 0', b'record 5']
        >>> ds = grainfn.MapDataset.source(source).seed(3).shuffle().batch(4)
        >>> len(ds)
        3
        >>> source.close()
        >>> folder.cleanup()
    """

    def __init__(
        self,
        paths: paths_lib.Paths,
        reader_options: Mapping[str, Any] | None = None,
        *,
        parallel_reads: bool = True,
    ) -> None:
        validate.check_flag(parallel_reads, "parallel_reads")
        shown, files = paths_lib.resolve(paths)
        self._paths = shown
        self._files = files
        self._user_options = reader_options_dict = reader_lib.check_reader_options(reader_options)
        self._options = reader_lib.options_string(reader_options_dict)
        self._in_place = reader_lib.reads_in_place(reader_options_dict)
        self._parallel = parallel_reads or not self._in_place
        self._counts = tuple(reader_lib.count_records(files, self._options))
        self._ranges = ranges_lib.file_ranges(self._counts)
        self._length = self._ranges.length
        self._repr = paths_lib.array_record_repr(shown, reader_options_dict)
        self._start_process()

    def _start_process(self) -> None:
        """Fresh reader slots and locks, for a new or unpickled source or a forked process."""
        self._readers: list[tuple[Any, threading.Lock] | None] = [None] * len(self._files)
        self._open_lock = threading.Lock()
        self._pid = os.getpid()

    # -- The protocol.

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> bytes:
        """Record `index` (0 <= index < len) as bytes."""
        return self._read_one(*ranges_lib.locate(self._ranges, self._check(index)))

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> list[bytes]:
        """The records at `indices` (any order, repeats allowed), in that order.

        The indices are split by file; each file's part is read at once.
        """
        try:
            if isinstance(indices, np.ndarray) and indices.dtype.kind in "iu" and indices.ndim == 1:
                keys = indices.tolist()
            else:
                keys = list(map(operator.index, indices))
        except TypeError:
            raise TypeError(f"indices must be a sequence of integers, got {indices!r}.") from None
        if not keys:
            return []
        low, high = min(keys), max(keys)
        if low < 0 or high >= self._length:
            self._check(low if low < 0 else high)
        parts = ranges_lib.split_by_file(self._ranges, keys)
        if parts[0].slots is None:
            return self._read_many(parts[0].file, parts[0].positions)
        records: list[Any] = [None] * len(keys)
        for part in parts:
            for slot, record in zip(part.slots or (), self._read_many(part.file, part.positions)):
                records[slot] = record
        return records

    def __iter__(self) -> Iterator[bytes]:
        """The records in order, read in blocks."""
        for start in range(0, self._length, _BLOCK):
            yield from self.__getitems__(range(start, min(start + _BLOCK, self._length)))

    # -- Reading.

    def _check(self, index: Any) -> int:
        return ranges_lib.check_index(index, self._length, self._repr)

    def _reader(self, shard: int) -> tuple[Any, threading.Lock]:
        """The open reader of file `shard` and its lock, opened on first use in this process."""
        if self._pid != os.getpid():  # forked: the parent's readers are not ours
            self._start_process()
        entry = self._readers[shard]
        if entry is None:
            with self._open_lock:
                entry = self._readers[shard]
                if entry is None:
                    entry = (self._open(shard), threading.Lock())
                    self._readers[shard] = entry
        return entry

    def _open(self, shard: int) -> Any:
        path = self._files[shard]
        reader = reader_lib.open_reader(path, self._options)
        if reader.num_records() != self._counts[shard]:
            found = reader.num_records()
            reader.close()
            raise ValueError(
                f"ArrayRecord file {path!r} has changed since this source was made: it had "
                f"{self._counts[shard]} records and now has {found}. Make a new source."
            )
        return reader

    def _read_one(self, shard: int, position: int) -> bytes:
        reader, lock = self._reader(shard)
        try:
            with lock:
                if self._in_place:
                    reader.seek(position)
                    return reader.read()
                return reader.read([position])[0]
        except RuntimeError as error:
            raise self._failed(shard, reader, lock, error) from None

    def _read_many(self, shard: int, positions: list[int]) -> list[bytes]:
        if len(positions) == 1:  # nothing to parallelize: the cheaper in-thread read
            return [self._read_one(shard, positions[0])]
        reader, lock = self._reader(shard)
        try:
            with lock:
                if self._parallel:
                    return reader.read(positions)
                records = []
                for position in positions:
                    reader.seek(position)
                    records.append(reader.read())
                return records
        except RuntimeError as error:
            raise self._failed(shard, reader, lock, error) from None

    def _failed(
        self, shard: int, reader: Any, lock: threading.Lock, error: RuntimeError
    ) -> OSError:
        """The error to raise for a failed read, after dropping the reader.

        A reader that failed stays failed; the next read opens the file anew.
        """
        with self._open_lock:
            entry = self._readers[shard]
            if entry is not None and entry[0] is reader:
                self._readers[shard] = None
        with lock:
            _close_quietly(reader)
        return OSError(f"Reading ArrayRecord file {self._files[shard]!r} failed: {error}")

    # -- Life cycle.

    def close(self) -> None:
        """Closes the open readers; a later read opens them again."""
        with self._open_lock:
            entries, self._readers = self._readers, [None] * len(self._files)
        for entry in entries:
            if entry is not None:
                with entry[1]:
                    _close_quietly(entry[0])

    def __enter__(self) -> ArrayRecordDataSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Nobody else can be reading: close without taking locks. A partly
        # built source has no readers; at interpreter exit, anything may be gone.
        for entry in getattr(self, "_readers", ()):
            if entry is not None:
                with contextlib.suppress(Exception):
                    entry[0].close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_readers", "_open_lock", "_pid"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start_process()

    # -- Naming.

    @property
    def paths(self) -> tuple[str, ...]:
        """The files read, in order, as given (glob patterns expanded)."""
        return self._paths

    def file_paths(self) -> dict[str, str]:
        """The files read, as `paths` names them, to the absolute paths they are opened by.

        A saved iterator state records a fingerprint of each, so that a
        restore into changed files is refused (`grainfn._src.core.fingerprints`).
        """
        return dict(zip(self._paths, self._files))

    @property
    def reader_options(self) -> dict[str, str]:
        """The reader options given (the defaults not included)."""
        return dict(self._user_options)

    @property
    def display_name(self) -> str:
        """How pipeline descriptions name this source: its repr."""
        return self._repr

    def __repr__(self) -> str:
        return self._repr

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayRecordDataSource):
            return NotImplemented
        return (self._files, self._user_options) == (other._files, other._user_options)

    def __hash__(self) -> int:
        return hash((self._files, tuple(sorted(self._user_options.items()))))


def _close_quietly(reader: Any) -> None:
    with contextlib.suppress(Exception):  # a failed reader stays failed; closing must not raise
        reader.close()
