"""Grain's `parquet_dataset` source: ParquetIterDataset, a thin wrapper over `fn.parquet`."""

from __future__ import annotations

import os
from typing import Any

from grainfn._src.facade.dataset import IterDataset
from grainfn._src.formats.parquet import parquet


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
