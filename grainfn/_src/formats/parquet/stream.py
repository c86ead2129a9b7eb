"""The rows of one Parquet file as a stream whose state is a position in the file.

The state is `ParquetPosition(row_group, row)`: the next row to read is row
`row` of row group `row_group`. Resuming reads that row group only, never the
rows before it. A cursor converts one row group at a time to numpy columns
(the conversion Grain uses, so the rows are equal to Grain's) and builds the
row dicts in blocks.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from grainfn._src.core import state as records
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.formats.parquet import files
from grainfn._src.formats.parquet.files import check_paths, pyarrow_parquet
from grainfn._src.stages.interleave import InterleavedStream

_BLOCK = 1024  # rows turned into dicts at a time
_PLAIN = (bool, int, float, str, type(None))


@records.register
class ParquetPosition(NamedTuple):
    """State of a Parquet file stream: the next row is row `row` of row group `row_group`.

    After the last row of a row group the position is `(row_group, its size)`;
    `(number of row groups, 0)` is the end of a file without row groups.
    """

    row_group: int
    row: int


@dataclasses.dataclass(frozen=True, repr=False)
class ParquetFileStream(Stream[dict[str, Any]]):
    """The rows of one Parquet file, in order, one dict per row.

    Build one with `parquet`. The file is opened by each
    cursor, and its footer once per process when a state is checked.

    Attributes:
        path: The file, as given (a local path or a URI pyarrow understands).
        read_kwargs: Keyword arguments for `pyarrow.parquet.ParquetFile`, as
            sorted `(name, value)` pairs.
    """

    path: str
    read_kwargs: tuple[tuple[str, Any], ...] = ()
    reads_in_parent: ClassVar[bool] = True  # mp_prefetch: a leaf read here, not in workers
    grain_state = GrainKeys(  # one file; of several, an interleave of these
        "ParquetIterDataset",
        ParquetPosition,
        (("row_group", "row_group"), ("index_within_row_group", "row")),
        parent=None,
    )

    @functools.cached_property
    def row_group_sizes(self) -> tuple[int, ...]:
        """The number of rows of each row group, read from the file's footer once."""
        parquet_file = files.open_file(self.path, dict(self.read_kwargs))
        try:
            return files.row_group_sizes(parquet_file)
        finally:
            parquet_file.close()

    def init(self) -> ParquetPosition:
        return ParquetPosition(0, 0)

    def open(self, state: Any) -> Cursor:
        return ParquetCursor(self, state)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, ParquetPosition, self.describe_stage(), path)
        sizes = self.row_group_sizes
        if state.row_group < len(sizes) and state.row <= sizes[state.row_group]:
            return
        if state.row_group == len(sizes) and state.row == 0:
            return
        if state.row_group < len(sizes):
            problem = f"a row group of {sizes[state.row_group]} rows"
        else:
            problem = f"a file of {len(sizes)} row groups"
        where = f"{path} " if path else ""
        raise ValueError(
            f"State {where}{state} is past the end of {problem} in Parquet file {self.path!r}; "
            "it belongs to another file, or the file has changed."
        )

    def file_paths(self) -> dict[str, str]:
        """The file, if it is local (not a URI), for the fingerprint a saved state records."""
        return {} if "://" in self.path else {self.path: self.path}

    def describe_stage(self) -> str:
        options = "".join(f", {name}={_show(value)}" for name, value in self.read_kwargs)
        return f"parquet({self.path!r}{options})"

    def __getstate__(self) -> dict[str, Any]:
        # The cached footer is per process: a copy reads the file's footer again.
        return {"path": self.path, "read_kwargs": self.read_kwargs}


class ParquetCursor(BaseCursor):
    """Reads one Parquet file from a position: a row group at a time, rows in blocks."""

    def __init__(self, stream: ParquetFileStream, state: ParquetPosition) -> None:
        self.file: Any = files.open_file(stream.path, dict(stream.read_kwargs))
        self.sizes = files.row_group_sizes(self.file)
        self.row_group = state.row_group
        self.start = state.row  # the row of block[0] within the row group
        self.names: list[str] = []
        self.columns: list[np.ndarray] | None = None  # the row group's, once read
        self.block: list[Any] = []
        self.iterator: Iterator[Any] = iter(self.block)

    def _refill(self) -> None:
        """Makes the next block of rows; raises StopIteration, moving nothing, at the end."""
        row, row_group = self.start + len(self.block), self.row_group
        if row >= self._size(row_group):
            row, row_group = 0, self._next_row_group(row_group)
            self.columns = None
        if self.columns is None:
            if self.file is None:
                raise ValueError(
                    "This Parquet cursor is closed. Make a new iterator, from its last state "
                    "if needed."
                )
            self.names, self.columns = files.read_row_group(self.file, row_group)
        stop = min(row + _BLOCK, self.sizes[row_group])
        self.row_group, self.start = row_group, row
        self.block = files.rows(self.names, self.columns, row, stop)
        self.iterator = iter(self.block)

    def _size(self, row_group: int) -> int:
        return self.sizes[row_group] if row_group < len(self.sizes) else 0

    def _next_row_group(self, after: int) -> int:
        """The first row group after `after` that has rows; StopIteration if none has."""
        for row_group in range(after + 1, len(self.sizes)):
            if self.sizes[row_group] > 0:
                return row_group
        raise StopIteration

    def next(self) -> Any:
        for row in self.iterator:
            return row
        self._refill()
        return next(self.iterator)

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < count:
            taken = list(itertools.islice(self.iterator, count - len(out)))
            out.extend(taken)
            if len(out) < count:
                try:
                    self._refill()
                except StopIteration:
                    break
        return out

    def state(self) -> ParquetPosition:
        read = len(self.block) - operator.length_hint(self.iterator)
        return ParquetPosition(self.row_group, self.start + read)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file, self.columns = None, None


def read_options(read_kwargs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Keyword arguments for `pyarrow.parquet.ParquetFile` as sorted pairs, names checked.

    Examples:
        >>> read_options({"pre_buffer": False, "memory_map": True})
        (('memory_map', True), ('pre_buffer', False))
    """
    for name in read_kwargs:
        if not isinstance(name, str):
            raise TypeError(f"read option names must be strings, got {name!r}.")
    return tuple(sorted(read_kwargs.items()))


def _show(value: Any) -> str:
    """How a read option appears in a pipeline description: the same in every process."""
    if isinstance(value, _PLAIN) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value)
    ):
        return repr(value)
    return f"<{type(value).__name__}>"


CYCLE_LENGTH = 16
"""How many files of a list are read at once, one row from each in turn (as in Grain)."""


def parquet(path: Any, **read_kwargs: Any) -> Stream[dict[str, Any]]:
    """The rows of a Parquet file, one dict per row, as a stream with a position as state.

    Each row maps column names to the row's entry of the column converted
    with pyarrow's `to_numpy()`, one row group at a time: the rows Grain's
    `ParquetIterDataset` yields. The state is the row group and the row in
    it, so resuming reads from that row group on.

    Several files are read 16 at a time, one row from each in turn; a file
    that ends gives its slot to the next file of the list (Grain's
    interleave, `grainfn._src.stages.interleave`). A missing or unreadable file is
    reported when it is first opened (FileNotFoundError, ValueError).

    Args:
        path: A Parquet file (a `str` or `os.PathLike`, a local path or a URI
            pyarrow understands), or a sequence of them.
        **read_kwargs: Keyword arguments for `pyarrow.parquet.ParquetFile`,
            such as `memory_map=True`.

    Returns:
        A `ParquetFileStream` for one file; for several, an `InterleavedStream` of them.

    Raises:
        ImportError: if pyarrow is not installed (`pip install "grainfn[parquet]"`).
        TypeError: if `path` is not a path or a sequence of paths.
        ValueError: if `path` is an empty sequence.

    Examples:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from grainfn import fn
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = os.path.join(folder.name, "data.parquet")
        >>> pq.write_table(pa.table({"x": [1, 2, 3], "s": ["a", "b", None]}), file)
        >>> stream = parquet(file)
        >>> it = fn.iterate(stream)
        >>> next(it)
        {'x': np.int64(1), 's': 'a'}
        >>> it.state
        ParquetPosition(row_group=0, row=1)
        >>> list(fn.iterate(stream, it.state))
        [{'x': np.int64(2), 's': 'b'}, {'x': np.int64(3), 's': None}]
        >>> folder.cleanup()
    """
    paths = check_paths(path)
    options = read_options(read_kwargs)
    pyarrow_parquet()  # without pyarrow, fail here with the install hint, not when reading
    streams = tuple(ParquetFileStream(p, options) for p in paths)
    if len(streams) == 1:
        return streams[0]
    return InterleavedStream(streams, CYCLE_LENGTH)
