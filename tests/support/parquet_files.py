"""Parquet files for the tests, written with pyarrow: one of many column types, many small ones."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TYPED_ROWS = 53
"""Rows of the typed file: 8 row groups of 7 rows, the last one of 4."""


def typed_table(rows: int = TYPED_ROWS) -> Any:
    """A table of many column types; some row groups hold nulls and others none.

    The nulls sit in some row groups only, so a column converts differently in
    different row groups (an int64 column with a null becomes float64), as
    Grain's reader gives it.
    """

    def nullable(values: list[Any], every: int, upto: int) -> list[Any]:
        return [None if i < upto and i % every == 3 else v for i, v in enumerate(values)]

    ints = list(range(rows))
    return pa.table(
        {
            "id": pa.array(ints, pa.int64()),
            "small": pa.array([i % 100 for i in ints], pa.int8()),
            "nullable_int": pa.array(nullable([i * 3 for i in ints], 5, 14), pa.int64()),
            "score": pa.array(nullable([i / 4 for i in ints], 6, rows), pa.float32()),
            "flag": pa.array(nullable([i % 3 == 0 for i in ints], 7, 21), pa.bool_()),
            "text": pa.array(nullable([f"row {i}" * (i % 3) for i in ints], 4, rows)),
            "blob": pa.array(nullable([bytes([i % 256]) * (i % 4) for i in ints], 9, rows)),
            "tokens": pa.array(
                nullable([list(range(i % 5)) for i in ints], 8, rows), pa.list_(pa.int32())
            ),
            "words": pa.array([[f"w{i}", None][: i % 3] for i in ints], pa.list_(pa.string())),
            "pair": pa.array([[i, -i] for i in ints], pa.list_(pa.float64(), 2)),
            "meta": pa.array(
                nullable([{"k": i, "name": f"n{i}"} for i in ints], 10, rows),
                pa.struct([("k", pa.int64()), ("name", pa.string())]),
            ),
            "when": pa.array(
                [datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=i) for i in ints],
                pa.timestamp("ms"),
            ),
            "label": pa.array([("cat", "dog", None)[i % 3] for i in ints]).dictionary_encode(),
        }
    )


def write(table: Any, path: Path, row_group_size: int) -> str:
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def write_typed_file(folder: Path) -> str:
    """`typed_table()` in 8 row groups, in `folder`."""
    return write(typed_table(), folder / "typed.parquet", 7)


def write_many_files(folder: Path) -> list[str]:
    """18 files (more than the 16 read at once) of 0 to 9 rows in 1 to 3 row groups."""
    paths = []
    for f in range(18):
        rows = (f * 7) % 10  # files 0 and 10 have no rows
        table = pa.table(
            {
                "file": [f] * rows,
                "row": list(range(rows)),
                "name": [f"{f}/{r}" for r in range(rows)],
            }
        )
        paths.append(write(table, folder / f"part-{f:02d}.parquet", 4))
    return paths
