"""Grain's internal `grain._src.python.dataset.transformations.zip`, for its importers.

Code imports `ZipIterDataset` from this path. `ZipIterDataset` and `ZipMapDataset` are
grainfn's own, from `grainfn._src.facade.zip` (`grainfn.experimental`).
"""

from grainfn._src.facade.zip import ZipIterDataset, ZipMapDataset

__all__ = ["ZipIterDataset", "ZipMapDataset"]
