"""Access to Parquet files through pyarrow: opening them, and turning row groups into rows.

pyarrow is an optional dependency (`pip install "grainfn[parquet]"`); it is
imported on the first call that needs it, so `import grainfn` never loads it.

Rows come out exactly as Grain's `ParquetIterDataset` gives them: a dict per
row from column name to the row's entry of `column.to_numpy()`, converted a
whole row group at a time. That conversion depends on the row group's
contents (an integer column with a null in the row group becomes float64 with
NaN, a boolean one becomes an object array of `bool`s and `None`), so it must
be done per row group, never per smaller batch.
"""

from __future__ import annotations

import collections
import itertools
import operator
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from grainfn._src.core import validate

_INSTALL = 'pip install "grainfn[parquet]"'


def pyarrow_parquet() -> Any:
    """The `pyarrow.parquet` module, or an ImportError that says how to install it."""
    try:
        import pyarrow.parquet
    except ImportError as error:
        raise ImportError(
            f"Reading Parquet files needs pyarrow, which is not installed: {_INSTALL} "
            "(or pip install pyarrow)."
        ) from error
    return pyarrow.parquet


def check_paths(paths: Any) -> tuple[str, ...]:
    """One path, or a non-empty sequence of them, as a tuple of strings.

    Examples:
        >>> check_paths("a.parquet"), check_paths(["a.parquet", "b.parquet"])
        (('a.parquet',), ('a.parquet', 'b.parquet'))
        >>> check_paths([])
        Traceback (most recent call last):
        ...
        ValueError: paths is an empty sequence: there are no Parquet files to read.
    """
    if isinstance(paths, (str, os.PathLike)):
        return (_check_path(paths),)
    if not isinstance(paths, Sequence) or isinstance(paths, (bytes, bytearray)):
        raise TypeError(
            f"path must be a Parquet file (str or os.PathLike) or a sequence of them, got "
            f"{paths!r} of type {type(paths).__name__}."
        )
    if len(paths) == 0:
        raise ValueError("paths is an empty sequence: there are no Parquet files to read.")
    return tuple(_check_path(path) for path in paths)


def open_file(path: str, read_kwargs: Mapping[str, Any]) -> Any:
    """Opens `path` as a `pyarrow.parquet.ParquetFile`, with errors that name the file.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if it is a directory or not a Parquet file.
        TypeError: if pyarrow rejects `read_kwargs`.
    """
    pq = pyarrow_parquet()
    if os.path.isdir(path):
        raise ValueError(
            f"{path!r} is a directory, not a Parquet file. Pass the files in it, for example "
            f"sorted(glob.glob({os.path.join(path, '*.parquet')!r}))."
        )
    try:
        return pq.ParquetFile(path, **read_kwargs)
    except FileNotFoundError:
        raise FileNotFoundError(f"Parquet file {path!r} does not exist.") from None
    except TypeError as error:
        raise TypeError(
            f"pyarrow.parquet.ParquetFile rejects the read options {dict(read_kwargs)!r}: {error}"
        ) from None
    except (ValueError, OSError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"{path!r} is not a readable Parquet file: {error}") from None


def row_group_sizes(parquet_file: Any) -> tuple[int, ...]:
    """The number of rows in each row group of an open `ParquetFile`, from its footer."""
    metadata = parquet_file.metadata
    return tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))


def read_row_group(parquet_file: Any, row_group: int) -> tuple[list[str], list[np.ndarray]]:
    """Column names and numpy columns of one row group, each converted with `to_numpy()`."""
    table = parquet_file.read_row_group(row_group)
    return list(table.column_names), [column.to_numpy() for column in table.columns]


def rows(names: Sequence[str], columns: Sequence[np.ndarray], start: int, stop: int) -> list[Any]:
    """Rows `start <= i < stop` of numpy columns, as dicts from column name to entry.

    Each entry is what `column[i]` gives: a numpy scalar for a numeric
    column, the stored object for an object column.

    Examples:
        >>> rows(["x", "s"], [np.arange(4), np.array(["a", "b", None, "d"], object)], 1, 3)
        [{'x': np.int64(1), 's': 'b'}, {'x': np.int64(2), 's': None}]
    """
    out: list[dict[str, Any]] = [{} for _ in range(start, stop)]
    # Filled a column at a time, in C loops: about 3x faster than a dict(zip(...))
    # per row. Iterating a numpy array yields the same scalars as indexing it.
    for name, column in zip(names, columns):
        collections.deque(map(operator.setitem, out, itertools.repeat(name), column[start:stop]), 0)
    return out


def _check_path(path: Any) -> str:
    return validate.check_path(path, "Parquet", "a file name or a URI")
