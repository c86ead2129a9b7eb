"""Grain's thread-prefetch names that take an iterator or cut a dataset for threads.

`ThreadPrefetchDatasetIterator` reads an iterator ahead in a background
thread; `multithread_prefetch` cuts a pipeline into one logical shard per
thread (`grainfn._src.elastic.shards`) and interleaves them, as Grain does.
Both are built from the core's `thread_prefetch`, `logical_shard` and
`interleave`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.filter_check import with_options_applied
from grainfn._src.core.instrument import instrumented
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.state import StateCodec
from grainfn._src.device.put import put_on_device
from grainfn._src.elastic.shards import logical_shard
from grainfn._src.facade.datasets import IterDataset, iter_core
from grainfn._src.facade.iterator import DatasetIterator

T = TypeVar("T")


class ThreadPrefetchDatasetIterator(DatasetIterator[T]):
    """`parent` read ahead by a background thread, up to `prefetch_buffer_size` elements.

    It goes on from where `parent` stands, and takes it over: `parent` is
    closed, and this iterator yields what it would have yielded next. The
    states are `parent`'s own, so one restores with or without read-ahead; 0
    turns read-ahead off.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(6).to_iter_dataset())
        >>> next(it)
        0
        >>> ahead = ThreadPrefetchDatasetIterator(it, prefetch_buffer_size=2)
        >>> list(ahead)
        [1, 2, 3, 4, 5]
    """

    def __init__(self, parent: DatasetIterator[T], prefetch_buffer_size: int) -> None:
        if not isinstance(parent, DatasetIterator) or not hasattr(parent, "_core"):
            raise TypeError(
                "ThreadPrefetchDatasetIterator reads ahead a grainfn DatasetIterator (made by "
                f"iter(dataset)), got {type(parent).__name__}. For a dataset, use "
                "grain.experimental.ThreadPrefetchIterDataset(dataset, prefetch_buffer_size=n)."
            )
        size = validate.check_nonnegative_int(prefetch_buffer_size, "prefetch_buffer_size")
        super().__init__(parent)
        stream = fn.thread_prefetch(size, parent.core.stream)
        state = parent.core.state
        parent.close()
        self._codec = StateCodec(stream)
        self._attach(StreamIterator(instrumented(with_options_applied(stream)), state))


def multithread_prefetch(
    ds: IterDataset[T], num_threads: int, buffer_size: int, sequential_slice: bool = False
) -> IterDataset[T]:
    """`ds` cut into `num_threads` logical shards, each read by a thread, interleaved in turn.

    Shard `i` reads positions `i, i + num_threads, ...` of the MapDatasets under
    `ds` (with `sequential_slice`, part `i` of `num_threads` contiguous parts of
    its sources); the elements come from shard 0, 1, ... in turn, as in Grain.
    So, unlike `mp_prefetch`, the order depends on `num_threads`. 0 returns
    `ds`; 1 reads it ahead in one thread.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(6).to_iter_dataset()
        >>> list(multithread_prefetch(ds, num_threads=2, buffer_size=4))
        [0, 1, 2, 3, 4, 5]
        >>> list(multithread_prefetch(ds, num_threads=2, buffer_size=4, sequential_slice=True))
        [0, 3, 1, 4, 2, 5]
    """
    threads = validate.check_nonnegative_int(num_threads, "num_threads")
    size = validate.check_nonnegative_int(buffer_size, "buffer_size")
    if threads == 0:
        return ds
    stream = iter_core(ds, "multithread_prefetch")
    if threads == 1:
        return ds._rewrap(fn.thread_prefetch(size, stream))
    shards = [
        fn.thread_prefetch(size, logical_shard(stream, i, threads, sequential=sequential_slice))
        for i in range(threads)
    ]
    return ds._rewrap(fn.interleave(threads, shards))


def device_put(
    ds: IterDataset[T], device: Any, *, cpu_buffer_size: int = 4, device_buffer_size: int = 2
) -> IterDataset[T]:
    """`ds` moved to `device` (as `jax.device_put` takes it), read ahead on both sides.

    A thread reads `cpu_buffer_size` elements ahead on the host; another puts
    them on the device, `device_buffer_size` ahead. The states are `ds`'s own.

    Examples:
        >>> import jax
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(3).to_iter_dataset()
        >>> [int(x) for x in device_put(ds, jax.devices()[0])]
        [0, 1, 2]
    """
    cpu = validate.check_nonnegative_int(cpu_buffer_size, "cpu_buffer_size")
    on_device = validate.check_nonnegative_int(device_buffer_size, "device_buffer_size")
    stream = fn.thread_prefetch(cpu, iter_core(ds, "device_put"))
    return ds._rewrap(fn.thread_prefetch(on_device, put_on_device(device, stream)))
