"""Grain's transformation classes: subclass one and pass it to a dataset method or `apply`.

Examples:
    >>> import dataclasses
    >>> import grainfn as grain
    >>> @dataclasses.dataclass
    ... class Scale(grain.transforms.Map):
    ...     factor: int
    ...     def map(self, x):
    ...         return x * self.factor
    >>> list(grain.MapDataset.range(3).map(Scale(10)))
    [0, 10, 20]
"""

from grainfn._src.transforms import (
    Batch,
    DatasetSelectionMap,
    Filter,
    FlatMap,
    Map,
    MapWithIndex,
    RandomMap,
    TfRandomMap,
    Transformation,
    Transformations,
)

__all__ = [
    "Batch",
    "DatasetSelectionMap",
    "Filter",
    "FlatMap",
    "Map",
    "MapWithIndex",
    "RandomMap",
    "TfRandomMap",
    "Transformation",
    "Transformations",
]
