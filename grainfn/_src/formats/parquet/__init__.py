"""Parquet files as streams of row dicts, with positions as state (pyarrow needed to read)."""

from __future__ import annotations

from typing import Any

from grainfn._src.core.stream import Stream
from grainfn._src.formats.parquet.files import check_paths, pyarrow_parquet
from grainfn._src.formats.parquet.stream import ParquetFileStream, ParquetPosition, read_options
from grainfn._src.stages.interleave import InterleavedStream

CYCLE_LENGTH = 16
"""How many files of a list are read at once, one row from each in turn (as in Grain)."""

__all__ = [
    "CYCLE_LENGTH",
    "ParquetFileStream",
    "ParquetPosition",
    "parquet",
]


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
