"""Grain's internal `grain._src.python.dataset.transformations.flatmap`, for its importers.

axlearn (its `map_over_dataset`) builds `flatmap.FlatMapMapDataset(parent=ds, transform=t)`
from this path. `FlatMapMapDataset` and `FlatMapIterDataset` are grainfn's own,
from `grainfn._src.facade.flatmap` (`grainfn.experimental`).
"""

from grainfn._src.facade.flatmap import FlatMapIterDataset, FlatMapMapDataset

__all__ = ["FlatMapIterDataset", "FlatMapMapDataset"]
