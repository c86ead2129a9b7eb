"""A DataLoader's pipeline, built with the core combinators.

The records of one shard (`sampled`) go through the operations as record
functions. Everything stays map-level as long as the order allows: maps,
random maps, filters (which leave holes) and batches of consecutive records.
The first batch after a filter, and any flat_map or PackAndBatchOperation,
turn the dataset into a stream (`from_dataset` with the read options), and
what follows runs on the stream. So with workers, all the map-level work
(reading included) runs in the worker processes, and the many-to-one steps
after it run here; the elements and states are those of the same pipeline
without workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from grainfn import fn
from grainfn._src import transforms
from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset, upstream_holes
from grainfn._src.core.stream import Stream
from grainfn._src.loader import legacy
from grainfn._src.loader import operations as ops
from grainfn._src.loader.pack_and_batch import PackAndBatchOperation
from grainfn._src.loader.records import record_data
from grainfn._src.loader.sampled import sampled
from grainfn._src.loader.sharding import ShardOptions


def loader_stream(
    source: Any,
    sampler: Any,
    operations: Sequence[Any],
    shard: ShardOptions,
    *,
    worker_count: int = 0,
    worker_buffer_size: int = 1,
    read_threads: int = 0,
    read_buffer: int = 500,
    read_thread_name: str | None = None,
    worker_init_fn: Callable[[int, int], Any] | None = None,
    worker_timeout: float | None = None,
    adaptive: bool = True,
    ray_pool: Any = None,
    grain_worker_order: bool = False,
) -> Stream[Any]:
    """The stream of a DataLoader: shard `shard`'s records through `operations`.

    `worker_count`, `worker_buffer_size`, `worker_init_fn`, `worker_timeout`
    and `adaptive` are those of `fn.mp_prefetch`; the read options (`read_threads`,
    `read_buffer`, `read_thread_name`) those of `fn.from_dataset`;
    `ray_pool`, a `fn.RayPool` whose actors do the map-level work instead
    (`fn.ray_prefetch`, with `adaptive` and `worker_timeout`).
    `grain_worker_order` with workers gives the order of Grain's DataLoader:
    worker `w` of `n` takes the shard's records `w, w + n, ...` through the
    operations (its own filters and batches), and the workers' elements come
    in turn (`GrainWorkerOrderStream`). Each worker's stream is built here, so
    `worker_count` is then at most 1024, or the shard's number of records if
    more (`check_shard_count`): a worker past the records reads nothing.

    Raises:
        ValueError: for a `worker_count` above that with `grain_worker_order`,
            before any worker's stream is built.

    Examples:
        >>> from grainfn._src.loader.samplers import SequentialSampler
        >>> from grainfn._src.loader.sharding import NoSharding
        >>> from grainfn.fn import iterate
        >>> batch = legacy.BatchOperation(2)
        >>> stream = loader_stream("abcde", SequentialSampler(5), [batch], NoSharding())
        >>> [b.tolist() for b in iterate(stream)]
        [['a', 'b'], ['c', 'd'], ['e']]
    """

    def to_stream(data: Any) -> Stream[Any]:
        if isinstance(data, Stream):
            return data
        return fn.from_dataset(
            data, threads=read_threads, buffer=read_buffer, thread_name=read_thread_name
        )

    def through_operations(data: Dataset[Any] | Stream[Any]) -> Stream[Any]:
        for operation in operations:
            data = _apply(check_operation(operation), data, to_stream)
        return to_stream(fn.map(record_data, data))

    records = sampled(source, sampler, shard)
    if grain_worker_order and worker_count > 0:
        # Imported here: logical shards are for runs moving between Grain and grainfn.
        from grainfn._src.shards.logical import check_shard_count
        from grainfn._src.shards.worker_order import WITHOUT_WORKER_ORDER, GrainWorkerOrderStream

        shard_records = "the shard's records"
        check_shard_count(
            worker_count, records.length, "worker_count", shard_records, WITHOUT_WORKER_ORDER
        )
        workers = tuple(
            through_operations(fn.slice(slice(w, None, worker_count), records))
            for w in range(worker_count)
        )
        stream: Stream[Any] = GrainWorkerOrderStream(workers, worker_count)
    else:
        stream = through_operations(records)
    if check_ray_pool(ray_pool, worker_count) is not None:
        return fn.ray_prefetch(ray_pool, stream, adaptive=adaptive, worker_timeout=worker_timeout)
    if worker_count > 0:
        stream = fn.mp_prefetch(
            worker_count,
            stream,
            buffer_per_worker=max(1, worker_buffer_size),
            worker_init_fn=worker_init_fn,
            worker_timeout=worker_timeout,
            adaptive=adaptive,
        )
    return stream


def check_ray_pool(ray_pool: Any, worker_count: int) -> Any:
    """`ray_pool` (None, or a `fn.RayPool`), checked to go with `worker_count`.

    Raises:
        TypeError: if it is neither None nor a RayPool.
        ValueError: if there are worker processes too.
    """
    if ray_pool is None:
        return None
    from grainfn._src.parallel.ray_pool import RayPool

    if not isinstance(ray_pool, RayPool):
        raise TypeError(
            f"ray_pool must be a grainfn.fn.RayPool, got {ray_pool!r} of type "
            f"{type(ray_pool).__name__}."
        )
    if worker_count > 0:
        raise ValueError(
            f"A DataLoader reads with worker processes (worker_count={worker_count}) or with a "
            "Ray pool (ray_pool=...), not both: pass worker_count=0 with ray_pool."
        )
    return ray_pool


OPERATIONS: tuple[tuple[type[Any], str, str], ...] = (
    *transforms.TRANSFORMS,
    (legacy.MapOperation, "map", "map_function"),
    (legacy.RandomMapOperation, "random_map", "random_map_function"),
    (transforms.TfRandomMap, "random_map", "np_random_map"),
    (legacy.FilterOperation, "filter", "condition_function"),
    (legacy.BatchOperation, "batch", "batch_fn"),
    (PackAndBatchOperation, "pack_and_batch", "__call__"),
)
"""What a DataLoader takes: Grain's transformations (their one table) and legacy operations."""

_RECORD_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "map": ops.RecordMap,
    "random_map": ops.RecordRandomMap,
    "map_with_index": ops.RecordIndexMap,
}
"""How a one-to-one stage's function is lifted to records (metadata kept alongside)."""


def _apply(operation: Any, data: Any, to_stream: Callable[[Any], Stream[Any]]) -> Any:
    step = transforms.step_of(operation, OPERATIONS)
    assert step is not None, "checked by check_operation"
    if step.stage == "pack_and_batch":
        return operation.stream(to_stream(data))
    if step.stage == "batch":
        if isinstance(data, Dataset) and upstream_holes(data) is not None:
            data = to_stream(data)
        return fn.batch(
            operation.batch_size,
            data,
            drop_remainder=operation.drop_remainder,
            batch_fn=ops.RecordBatch(
                step.function, legacy=isinstance(operation, legacy.BatchOperation)
            ),
        )
    assert step.function is not None, "only a batch may have no function"
    if step.stage == "flat_map":
        record_fn = ops.RecordFlatMap(step.function, operation.max_fan_out)
        return fn.flat_map(record_fn, to_stream(data))
    if step.stage == "filter":
        return fn.filter(ops.RecordFilter(step.function), data)
    return fn.map(_RECORD_FUNCTIONS[step.stage](step.function), data)


def is_operation(value: Any) -> bool:
    """Whether a DataLoader takes `value` as one operation (see `OPERATIONS`)."""
    return transforms.step_of(value, OPERATIONS) is not None


def check_operation(operation: Any) -> Any:
    """`operation` if a DataLoader takes it.

    Raises:
        TypeError: for anything else (a function of the whole iterator cannot be
            checkpointed), naming the classes that are taken.
    """
    if is_operation(operation):
        return operation
    raise TypeError(
        f"DataLoader operations must be Map, RandomMap, MapWithIndex, Filter, FlatMap or Batch "
        f"transformations (grainfn.transforms), got {validate.short_repr(operation)} of type "
        f"{type(operation).__name__}. A function of the whole iterator cannot be checkpointed: "
        "write it as one of these."
    )
