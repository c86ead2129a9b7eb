"""Grain's `flatmap` transformation: FlatMapMapDataset and FlatMapIterDataset (`fn.flat_map`)."""

from __future__ import annotations

from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import IterDataset, MapDataset, iter_core, map_core
from grainfn._src.transforms import FlatMap

T = TypeVar("T")


class FlatMapMapDataset(MapDataset[Any]):
    """`transform.max_fan_out` positions per element of `parent`, holding its parts.

    Examples:
        >>> import grainfn as grain
        >>> class Twice(grain.transforms.FlatMap):
        ...     max_fan_out = 2
        ...     def flat_map(self, x):
        ...         return [x, x]
        >>> list(FlatMapMapDataset(grain.MapDataset.range(2), Twice()))
        [0, 0, 1, 1]
    """

    def __init__(self, parent: MapDataset[Any], transform: FlatMap) -> None:
        super().__init__(parent)
        transform = _flat_map(transform)
        self._core = fn.flat_map(
            transform.flat_map,
            map_core(parent, type(self).__name__),
            max_fan_out=transform.max_fan_out,
        )


class FlatMapIterDataset(IterDataset[Any]):
    """Every part of `transform.flat_map(element)` for every element of `parent`."""

    def __init__(self, parent: IterDataset[Any], transform: FlatMap) -> None:
        super().__init__(parent)
        self._core = fn.flat_map(_flat_map(transform).flat_map, iter_core(parent, "FlatMap"))


def _flat_map(transform: Any) -> FlatMap:
    if not isinstance(transform, FlatMap):
        raise TypeError(
            f"A FlatMap transformation (with max_fan_out and flat_map) is expected, got "
            f"{transform!r}."
        )
    return transform
