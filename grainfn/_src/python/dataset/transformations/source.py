"""Grain's internal `grain._src.python.dataset.transformations.source`, for its importers.

axlearn's tests build `source.SourceMapDataset(examples)` from this path (its
`fake_grain_source`), and other code subclasses it. `SourceMapDataset` and
`RangeMapDataset` are grainfn's own, from `grainfn._src.facade.dataset`.
"""

from grainfn._src.facade.dataset import RangeMapDataset, SourceMapDataset

__all__ = ["RangeMapDataset", "SourceMapDataset"]
