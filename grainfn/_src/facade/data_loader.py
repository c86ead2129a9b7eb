"""Grain's `data_loader` module: DataLoader and its iterator, thin wrappers over `loader_stream`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.stream import Stream
from grainfn._src.facade.dataset import CheckpointableIterator, DatasetIterator
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions, determine_worker_count
from grainfn._src.loader.pipeline import (
    check_operation,
    check_ray_pool,
    is_operation,
    loader_stream,
)
from grainfn._src.loader.sharding import ShardOptions, check_shard_options
from grainfn._src.parallel.deaths import check_worker_timeout
from grainfn._src.stages.sources import check_source


class DataLoader:
    """Reads a source in the order a sampler gives, through operations: Grain's DataLoader.

    With `worker_count=N` the reads and per-record operations run in N worker
    processes, and the output is the same for every N (0 included); a state
    saved with N workers restores with any other number.

    Args:
        data_source: A random-access source: `len(source)` and `source[key]`.
        sampler: Which record to read at each step, e.g. an `IndexSampler`.
        operations: Map, RandomMap, MapWithIndex, Filter, FlatMap and Batch
            transformations, applied in order to each record's data.
        worker_count: Worker processes; 0 reads here, None uses every core.
        worker_buffer_size: Blocks each worker computes ahead (0 counts as 1).
        shard_options: Which shard of the sampler's indices to read; None
            takes the sampler's own.
        read_options: The threads that read the source and the per-record
            operations, named as Grain's, and their read-ahead (see ReadOptions).
        enable_profiling: Accepted for Grain compatibility; grainfn has no profiler.
        worker_timeout: Seconds to wait for a worker's next answer before the
            worker is killed and `next()` raises `WorkerError`; nothing is lost,
            and the next `next()` reads on with a new worker. None waits as long
            as the worker lives; at most 2147483 (about 24.8 days, the longest
            wait poll() takes). With a `ray_pool`, the same for its actors
            (see `grainfn.fn.ray_prefetch`). Not in Grain (PyTorch's DataLoader
            `timeout`).
        ray_pool: A `grainfn.fn.RayPool` whose Ray actors do the reads and
            per-record operations instead of worker processes (with
            `worker_count=0`); the output and states are the same. Not in Grain.
        grain_worker_order: Yield Grain's DataLoader order for `worker_count`
            workers instead of grainfn's own (which never depends on the
            worker count): worker `w` of `n` takes the records `w, w + n, ...`
            of the shard through the operations (its own filters and batches)
            and the workers' elements come in turn. Grain's DataLoader states
            of that many workers are then read, and `grain_state()` writes
            them, for any operations. For runs moving between Grain and
            grainfn mid-epoch. Not in Grain.
        adaptive: Whether records may be read in this process while the
            workers (or the `ray_pool`'s actors) start, and where their work
            is too cheap to pay for its trip (the default; the output is the
            same). False keeps every read in the workers or actors, for
            operations that may crash a process. Not in Grain.

    Examples:
        >>> import grainfn as grain
        >>> loader = grain.DataLoader(
        ...     data_source=list(range(10)),
        ...     sampler=grain.samplers.IndexSampler(10, num_epochs=1, shuffle=True, seed=1),
        ...     operations=[grain.transforms.Batch(4)],
        ... )
        >>> [batch.tolist() for batch in loader]
        [[5, 7, 6, 0], [4, 8, 9, 2], [1, 3]]
    """

    def __init__(
        self,
        *,
        data_source: Any,
        sampler: Any,
        operations: Sequence[Any] = (),
        worker_count: int | None = 0,
        worker_buffer_size: int = 1,
        shard_options: ShardOptions | None = None,
        read_options: ReadOptions | None = None,
        enable_profiling: bool = False,
        worker_timeout: float | None = None,
        ray_pool: Any = None,
        grain_worker_order: bool = False,
        adaptive: bool = True,
    ) -> None:
        self._data_source = check_source(data_source)
        if not callable(getattr(sampler, "__getitem__", None)):
            raise TypeError(
                f"sampler must answer sampler[index] with a RecordMetadata (an IndexSampler, "
                f"for example), got {sampler!r} of type {type(sampler).__name__}."
            )
        self._sampler = sampler
        _check_sampler_fits(sampler, self._data_source)
        if is_operation(operations) or not isinstance(operations, Iterable):
            operations = [operations]  # one operation; check_operation names a wrong one
        self._operations = tuple(check_operation(op) for op in operations)
        count = determine_worker_count(worker_count)
        buffer = validate.check_nonnegative_int(worker_buffer_size, "worker_buffer_size")
        self._multiprocessing_options = MultiprocessingOptions(
            num_workers=count,
            per_worker_buffer_size=max(1, buffer),
            enable_profiling=validate.check_flag(enable_profiling, "enable_profiling"),
            worker_timeout=check_worker_timeout(worker_timeout),
            adaptive=validate.check_flag(adaptive, "adaptive"),
        )
        self._ray_pool = check_ray_pool(ray_pool, count)
        self._grain_worker_order = validate.check_flag(grain_worker_order, "grain_worker_order")
        self._shard_options = _shard_options(shard_options, sampler)
        self._read_options = read_options or ReadOptions()
        if not isinstance(self._read_options, ReadOptions):
            raise TypeError(f"read_options must be a grainfn.ReadOptions, got {read_options!r}.")

    @property
    def multiprocessing_options(self) -> MultiprocessingOptions:
        """The worker processes and their buffers."""
        return self._multiprocessing_options

    @property
    def shard_options(self) -> ShardOptions:
        """The shard this loader reads."""
        return self._shard_options

    def stream(self, worker_init_fn: Callable[[int, int], Any] | None = None) -> Stream[Any]:
        """The core stream this loader reads (see `grainfn.fn`)."""
        options = self._read_options
        return loader_stream(
            self._data_source,
            self._sampler,
            self._operations,
            self._shard_options,
            worker_count=self._multiprocessing_options.num_workers,
            worker_buffer_size=self._multiprocessing_options.per_worker_buffer_size,
            worker_timeout=self._multiprocessing_options.worker_timeout,
            adaptive=self._multiprocessing_options.adaptive,
            read_threads=options.threads,
            read_buffer=options.buffer,
            read_thread_name=options.thread_name,
            worker_init_fn=worker_init_fn,
            ray_pool=self._ray_pool,
            grain_worker_order=self._grain_worker_order,
        )

    def identity(self) -> dict[str, str]:
        """What names this loader in its states, besides the pipeline: sampler and source."""
        return {"sampler": repr(self._sampler), "data_source": source_repr(self._data_source)}

    def __iter__(self) -> DataLoaderIterator:
        return DataLoaderIterator(self)

    def __repr__(self) -> str:
        return (
            f"DataLoader(data_source={source_repr(self._data_source)}, "
            f"sampler={self._sampler!r}, operations={len(self._operations)}, "
            f"worker_count={self._multiprocessing_options.num_workers})"
        )


class DataLoaderIterator(CheckpointableIterator[Any]):
    """An iterator over a DataLoader, whose state is JSON bytes: Grain's DataLoaderIterator.

    The state names the pipeline, the sampler and the source; `set_state`
    refuses one of another loader and says what differs. The worker count is
    recorded but not checked: a state restores with any number of workers.

    Examples:
        >>> import grainfn as grain
        >>> loader = grain.DataLoader(
        ...     data_source="abcdef", sampler=grain.samplers.SequentialSampler(6)
        ... )
        >>> it = iter(loader)
        >>> next(it), next(it)
        ('a', 'b')
        >>> state = it.get_state()
        >>> next(it)
        'c'
        >>> it.set_state(state)
        >>> next(it)
        'c'
    """

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        self._identity = loader.identity()
        self._iterator: DatasetIterator[Any] = DatasetIterator.over(loader.stream())
        self._next = self._iterator.__next__

    @property
    def dataset_iterator(self) -> DatasetIterator[Any]:
        """The DatasetIterator underneath, whose `.core` is the core iterator."""
        return self._iterator

    def __iter__(self) -> DataLoaderIterator:
        return self

    def __next__(self) -> Any:
        return self._next()

    def get_state(self) -> bytes:
        """The position after the last element returned, as JSON bytes."""
        state = self._iterator.get_state()
        state.update(self._identity)
        state["worker_count"] = self._loader.multiprocessing_options.num_workers
        return json.dumps(state, indent=2).encode()

    def grain_state(self, worker_count: int | None = None) -> bytes:
        """The position after the last element returned, as Grain's DataLoader writes it.

        For going back to Grain mid-run: Grain's DataLoader with the same
        sampler, source and operations, and `worker_count` workers, continues
        from it with the elements this iterator would yield next. With more
        than one Grain worker only maps carry over (each Grain worker batches
        and filters its own records), unless this loader yields Grain's worker
        order. `worker_count` defaults to 0, or to this loader's worker count
        where it yields Grain's worker order.

        Raises:
            ValueError: for a bad `worker_count`, or an operation whose Grain
                order with that many workers is not grainfn's, naming it.

        Examples:
            >>> import json
            >>> import grainfn as grain
            >>> loader = grain.DataLoader(
            ...     data_source="abcdef", sampler=grain.samplers.SequentialSampler(6)
            ... )
            >>> it = iter(loader)
            >>> next(it), next(it)
            ('a', 'b')
            >>> json.loads(it.grain_state(worker_count=2))["last_seen_indices"]
            {'0': 0, '1': 1}
        """
        from grainfn._src.grain_states.loaders import grain_source_name, loader_to_grain

        if worker_count is None:
            ordered = self._loader._grain_worker_order
            worker_count = self._loader.multiprocessing_options.num_workers if ordered else 0
        workers = validate.check_nonnegative_int(worker_count, "worker_count")
        core = self._iterator.core
        state = loader_to_grain(core.stream, core.state, self._loader.shard_options, workers)
        state["sampler"] = self._identity["sampler"]
        name = self._identity["data_source"]
        state["data_source"] = grain_source_name(self._loader._data_source, name)
        return json.dumps(state, indent=4).encode()

    def set_state(self, state: bytes | str | dict[str, Any]) -> None:
        """Continues from a state `get_state` returned for this loader (with any worker count).

        A state Grain's own DataLoader wrote for the same sampler and source is
        taken too, where it determines grainfn's position: with 0 or 1
        workers for any operations but FlatMap, with more for maps only (see
        `grainfn._src.grain_states.loaders`). Grain names an ArrayRecord
        source by the SHA-1 of its paths; it names this loader's source when
        the same paths hash to it.

        Raises:
            ValueError: if the state is not JSON, or belongs to another loader
                (source, sampler or operations) or version; the message says
                what differs.
        """
        # Imported here: the formats a loader state comes in are told apart there.
        from grainfn._src.grain_states.decoding import decode_loader_state

        codec = self._iterator._codec
        source, shard = self._loader._data_source, self._loader.shard_options
        self._iterator.restart_at(decode_loader_state(codec, state, self._identity, source, shard))

    def start_prefetch(self) -> None:
        """Starts the background reads (and worker processes) now."""
        self._iterator.start_prefetch()

    def close(self) -> None:
        """Stops the worker processes and threads; `next` then raises ValueError."""
        self._iterator.close()

    def __repr__(self) -> str:
        return f"DataLoaderIterator(state={self.get_state().decode()})"


def source_repr(source: Any) -> str:
    """How a loader state names its source: the type of an in-memory sequence, else its repr."""
    if isinstance(source, (list, tuple, np.ndarray, str, bytes)):
        return str(type(source))
    return repr(source)


def _check_sampler_fits(sampler: Any, source: Any) -> None:
    """Refuses a sampler whose record keys go past the end of the source."""
    records = validate.integer_or_none(getattr(sampler, "num_records", None))
    if records is None:
        return  # a sampler of its own: its keys show when read
    size = len(source)
    if records > size:
        raise ValueError(
            f"The sampler reads records 0 to {records - 1} (num_records={records}), and the data "
            f"source has {size}. Make the sampler with num_records=len(data_source) = {size}."
        )


def _shard_options(options: ShardOptions | None, sampler: Any) -> ShardOptions:
    if options is not None:
        return check_shard_options(options)
    own = getattr(sampler, "shard_options", None)
    if isinstance(own, ShardOptions):
        return own
    raise ValueError(
        f"DataLoader needs shard_options: the sampler {sampler!r} has none. Pass "
        "shard_options=grainfn.sharding.NoSharding() to read all the data, or "
        "ShardByJaxProcess() to split it between JAX processes."
    )
