"""Parquet files as streams of row dicts, with positions as state (pyarrow needed to read)."""

from grainfn._src.formats.parquet.stream import CYCLE_LENGTH as CYCLE_LENGTH
from grainfn._src.formats.parquet.stream import ParquetFileStream as ParquetFileStream
from grainfn._src.formats.parquet.stream import ParquetPosition as ParquetPosition
from grainfn._src.formats.parquet.stream import parquet as parquet

__all__ = [
    "CYCLE_LENGTH",
    "ParquetFileStream",
    "ParquetPosition",
    "parquet",
]
