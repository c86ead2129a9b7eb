"""Grain's internal `grain._src.python.dataset.dataset`, for code that imports it by that path.

axlearn and others import the module to subclass `MapDataset` (`dataset.MapDataset[T]`),
and `DatasetIterator` from it. The names are grainfn's own: `MapDataset` and
`IterDataset` of `grainfn._src.facade.datasets`, `DatasetIterator` of
`grainfn._src.facade.iterator` (the same objects as `grainfn.MapDataset`,
`grainfn.IterDataset` and `grainfn.DatasetIterator`).
"""

from grainfn._src.facade.datasets import IterDataset, MapDataset
from grainfn._src.facade.iterator import DatasetIterator

__all__ = ["DatasetIterator", "IterDataset", "MapDataset"]
