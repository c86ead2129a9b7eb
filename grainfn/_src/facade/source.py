"""Grain's `source` module: SourceMapDataset and RangeMapDataset, the leaves of a pipeline.

Grain's `MapDataset.source` and `MapDataset.range` build these classes, and
code builds them by name from Grain's internal module (axlearn's tests:
`source.SourceMapDataset(examples)`). Each is the MapDataset of
`grainfn.fn.source` or `grainfn.fn.range`, with every MapDataset method.
"""

from __future__ import annotations

from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import MapDataset

T = TypeVar("T")


class SourceMapDataset(MapDataset[T]):
    """The items of a random-access source (`len` and `[]`): `MapDataset.source(source)`.

    The source is at `self._source`, as in Grain, for a subclass: one that
    defines its own `__getitem__` (and `__len__`) is read through them, as any
    MapDataset subclass is.

    Examples:
        >>> ds = SourceMapDataset(["a", "b", "c"]).seed(1).shuffle().repeat(2)
        >>> len(ds), sorted(ds) == ["a", "a", "b", "b", "c", "c"]
        (6, True)
        >>> class Doubled(SourceMapDataset):
        ...     def __len__(self):
        ...         return len(self._source)
        ...     def __getitem__(self, index):
        ...         return self._source[index % len(self)] * 2
        >>> list(Doubled([1, 2]).map(str))
        ['2', '4']
    """

    def __init__(self, source: Any) -> None:
        super().__init__()
        self._source = source
        if type(self).__getitem__ is MapDataset.__getitem__:  # not a subclass that reads itself
            self._core = fn.source(source)


class RangeMapDataset(MapDataset[int]):
    """The integers of Python's `range(start, stop, step)`: `MapDataset.range(...)`.

    Examples:
        >>> list(RangeMapDataset(2, 12, 3)), len(RangeMapDataset(4))
        ([2, 5, 8, 11], 4)
    """

    def __init__(self, start: int, stop: int | None = None, step: int = 1) -> None:
        super().__init__()
        self._core = fn.range(start, stop, step)
