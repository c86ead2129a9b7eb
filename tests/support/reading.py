"""Reading a dataset's positions in tests."""

from __future__ import annotations

from typing import Any

from grainfn import fn


def read(ds: fn.Dataset, count: int | None = None) -> list[Any]:
    """Positions `0 .. count - 1` of `ds` (its first epoch by default), read as one block."""
    return ds.get_many(range(ds.length if count is None else count))


def read_to_end(iterable: Any) -> list[Any]:
    """Every element of `iterable` (Grain's or grainfn's), its iterator closed where it can be."""
    iterator = iter(iterable)
    out = list(iterator)
    if hasattr(iterator, "close"):
        iterator.close()
    return out


def read_reader(reader: Any) -> list[Any]:
    """Every element a `BlockReader` has left, block after block, to its end."""
    got: list[Any] = []
    while True:
        try:
            got += reader.read()[1]
        except StopIteration:
            return got
