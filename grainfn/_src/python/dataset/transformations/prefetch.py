"""Grain's internal `grain._src.python.dataset.transformations.prefetch`, for its importers.

Code imports `ThreadPrefetchIterDataset` from this path. It, `ThreadPrefetchDatasetIterator`
and `multithread_prefetch` are grainfn's own (`grainfn.experimental`, from
`grainfn._src.facade.prefetch`).
"""

from grainfn._src.facade.prefetch import (
    ThreadPrefetchDatasetIterator,
    ThreadPrefetchIterDataset,
    multithread_prefetch,
)

__all__ = ["ThreadPrefetchDatasetIterator", "ThreadPrefetchIterDataset", "multithread_prefetch"]
