"""Grain's internal `grain._src.python.data_loader`, for code that imports it by that path.

axlearn's Grain inputs import `_determine_worker_count` from it: here that is
`grainfn._src.facade.options.determine_worker_count`, the rule by which
`DataLoader(worker_count=None)` uses every core this process may run on.
`DataLoader` and `DataLoaderIterator` are grainfn's (`grainfn.DataLoader`,
`grainfn.DataLoaderIterator`, from `grainfn._src.facade.data_loader`).
"""

from grainfn._src.facade.data_loader import DataLoader, DataLoaderIterator
from grainfn._src.facade.options import determine_worker_count as _determine_worker_count

__all__ = ["DataLoader", "DataLoaderIterator", "_determine_worker_count"]
