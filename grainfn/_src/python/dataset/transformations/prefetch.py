"""Grain's internal `grain._src.python.dataset.transformations.prefetch`, for its importers.

Code imports `ThreadPrefetchIterDataset` from this path. It, `ThreadPrefetchDatasetIterator`
and `multithread_prefetch` are grainfn's own (`grainfn.experimental`; from
`grainfn._src.facade.experimental` and `grainfn._src.facade.threads`).
"""

from grainfn._src.facade.experimental import ThreadPrefetchIterDataset
from grainfn._src.facade.threads import ThreadPrefetchDatasetIterator, multithread_prefetch

__all__ = ["ThreadPrefetchDatasetIterator", "ThreadPrefetchIterDataset", "multithread_prefetch"]
