"""Data sources: anything with `len()` and `[]`, and the protocol that names them."""

from grainfn._src.sources import RandomAccessDataSource, RangeDataSource

__all__ = ["RandomAccessDataSource", "RangeDataSource"]
