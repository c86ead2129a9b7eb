"""Grain's internal `grain._src.python.dataset.dataset`, for code that imports it by that path.

axlearn and others import the module to subclass `MapDataset` (`dataset.MapDataset[T]`),
and `DatasetIterator` from it. The names are grainfn's own: `MapDataset`,
`IterDataset` and `DatasetIterator` of `grainfn._src.facade.dataset` (the same
objects as `grainfn.MapDataset`, `grainfn.IterDataset` and
`grainfn.DatasetIterator`).
"""

from grainfn._src.facade.dataset import DatasetIterator, IterDataset, MapDataset

__all__ = ["DatasetIterator", "IterDataset", "MapDataset"]
