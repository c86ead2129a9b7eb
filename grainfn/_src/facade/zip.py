"""Grain's `zip` transformation: ZipMapDataset and ZipIterDataset, over `fn.zip`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.facade.dataset import IterDataset, MapDataset, map_core, stream_core

T = TypeVar("T")


class ZipMapDataset(MapDataset[tuple[Any, ...]]):
    """Tuples of the i-th elements of MapDatasets of equal length, as in Grain.

    A None (filtered-out element) of a parent stays inside its tuple. Parents
    of different lengths are a ValueError; slice them to a common length
    first (or zip to the shortest with `grainfn.fn.zip`).

    Examples:
        >>> import grainfn as grain
        >>> ds = ZipMapDataset([grain.MapDataset.range(3), grain.MapDataset.range(10, 13)])
        >>> list(ds)
        [(0, 10), (1, 11), (2, 12)]
        >>> ds[4]
        (1, 11)
    """

    def __init__(self, parents: Sequence[MapDataset[Any]]) -> None:
        cores = [
            map_core(parent, "ZipMapDataset")
            for parent in validate.check_list(parents, "ZipMapDataset")
        ]
        super().__init__(parents)
        self._core = fn.zip(cores, strict=True)


class ZipIterDataset(IterDataset[tuple[Any, ...]]):
    """Tuples of the next elements of several datasets, as in Grain.

    With `strict` (Grain's default), parents that end at different elements
    raise ValueError after the last full tuple; without it, the first parent
    to end ends the zip. A MapDataset parent is read with `to_iter_dataset()`.

    Examples:
        >>> import grainfn as grain
        >>> a = grain.MapDataset.range(3).to_iter_dataset()
        >>> b = grain.MapDataset.source("xyzw").to_iter_dataset()
        >>> list(ZipIterDataset([a, b], strict=False))
        [(0, 'x'), (1, 'y'), (2, 'z')]
    """

    def __init__(
        self, parents: Sequence[IterDataset[Any] | MapDataset[Any]], *, strict: bool = True
    ) -> None:
        streams = [
            stream_core(parent, "ZipIterDataset")
            for parent in validate.check_list(parents, "ZipIterDataset")
        ]
        super().__init__(parents)
        self._core = fn.zip(streams, strict=strict)
