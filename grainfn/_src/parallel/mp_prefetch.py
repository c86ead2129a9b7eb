"""mp_prefetch: a stream whose dataset reads run ahead in worker processes.

The per-position work of a pipeline is what its datasets compute: every
map-level stage, up to the `from_dataset` stages that turn them into streams.
`PrefetchedStream` hands the blocks of positions those leaves read to a
`WorkerPool`, and the stream stages above them (dropping Nones, iter-level
batch, mix, ...) run in the parent on blocks that come back in position order.
So the elements and the states are exactly those of the stream without
workers, for any number of workers, and a state saved with W workers restores
with any W'. The stage is transparent: it adds no line to the pipeline a
state names.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.blocks import BlockReader, Executor, Meter
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.grain_state import Beneath, CannotWriteError, GrainState, OwnGrainState
from grainfn._src.core.reading import DatasetCursor, FromDatasetStream
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream
from grainfn._src.parallel.deaths import check_worker_timeout
from grainfn._src.parallel.processes import LeafExecutor, WorkerPool

T = TypeVar("T")


GRAINS_PREFETCH_KEYS = {"workers_state", "iterators_in_use_indices"}
"""Keys of Grain's mp_prefetch state: one iterator per worker, each over its slice of the data."""


def _read_grain_state(stream: Any, grains: Any, path: str, beneath: Beneath) -> Any:
    """The parent's record; Grain's own mp_prefetch state only over Grain's worker order."""
    grains_prefetch = isinstance(grains, dict) and bool(GRAINS_PREFETCH_KEYS & grains.keys())
    if grains_prefetch and not _in_grains_worker_order(stream):
        raise ValueError(
            f"Grain's {path} is the state of its mp_prefetch, which splits the position "
            "between its worker processes; it does not determine grainfn's (whose workers "
            "never split the data). Read it in Grain's worker order: "
            "ds.mp_prefetch(options, grain_worker_order=True) with Grain's worker count."
        )
    return beneath(stream.parent, grains, path)


def _write_grain_state(stream: Any, record: Any, path: str, beneath: Beneath) -> Any:
    """Grain's mp_prefetch state, where the parent yields Grain's worker order."""
    if not _in_grains_worker_order(stream):
        raise CannotWriteError(
            "Grain's mp_prefetch state splits the position between its worker processes, each "
            "over its own slice of the data, where grainfn's is one position; read in Grain's "
            "worker order (mp_prefetch(options, grain_worker_order=True)) to write it, or write "
            "the state of the same pipeline without mp_prefetch, for Grain without it"
        )
    return beneath(stream.parent, record, path)


def _in_grains_worker_order(stream: Any) -> bool:
    declared = stream.parent.grain_state
    return declared is not None and declared.grains_prefetch


@dataclasses.dataclass(frozen=True, repr=False)
class PrefetchedStream(PassThroughStream):
    """The parent stream, its dataset reads done ahead by `num_workers` processes."""

    spec_rule = SpecRule.PARENT

    num_workers: int
    buffer_per_worker: int = 1
    worker_init_fn: Callable[[int, int], Any] | None = None
    worker_timeout: float | None = None  # how it reads, like the others: not in any state
    adaptive: bool = True  # whether work too cheap for the workers moves to this process
    transparent = True
    executes_leaves = True  # a nested one gives way to it (see `with_leaves`)
    grain_state: ClassVar[GrainState | None] = OwnGrainState(
        None, _read_grain_state, _write_grain_state
    )

    def open(self, state: Any) -> Cursor:
        if self.num_workers == 0:
            return self.parent.open(state)
        leaves: list[FromDatasetStream[Any]] = []
        collect_leaves(self.parent, leaves)
        if not leaves:  # nothing to read in workers: start no processes
            return self.parent.open(state)
        pool = WorkerPool(
            [leaf.reads for leaf in leaves],
            self.num_workers,
            self.buffer_per_worker,
            self.worker_init_fn,
            self.worker_timeout,
        )

        # What a worker_init_fn sets up in each worker may be what the maps need, and a
        # worker_timeout watches workers only: with either, the work stays in the workers.
        adaptive = self.adaptive and self.worker_init_fn is None and self.worker_timeout is None

        meter = Meter()

        def pooled_leaf(leaf: FromDatasetStream[Any]) -> PooledLeaf:
            executor = functools.partial(LeafExecutor, pool, leaves.index(leaf))
            return PooledLeaf(leaf, executor, adaptive, meter=meter)

        pooled = with_leaves(self.parent, pooled_leaf)
        return PoolCursor(pooled.open(state), pool, meter)

    def step(self, state: Any) -> tuple[Any, Any]:
        # One element is not worth starting processes for; the result is the same.
        return self.parent.step(state)

    def describe_stage(self) -> str:
        return f"mp_prefetch({self.num_workers})"


@dataclasses.dataclass(frozen=True, repr=False)
class PooledLeaf(Stream[Any]):
    """A `from_dataset` leaf whose blocks come from an executor (worker processes, Ray actors)."""

    leaf: FromDatasetStream[Any]
    executor: Callable[[], Executor]
    adaptive: bool = True  # False: every block goes to the executor (see `BlockReader`)
    read_while_starting: bool | None = None  # None: as `adaptive` (see `BlockReader`)
    meter: Meter | None = dataclasses.field(default=None, compare=False)  # see `PoolCursor`

    def init(self) -> records.DatasetPosition:
        return self.leaf.init()

    def check_state(self, state: Any, path: str = "") -> None:
        self.leaf.check_state(state, path)

    def open(self, state: records.DatasetPosition) -> Cursor:
        reader = BlockReader(
            self.leaf.reads,  # in the leaf's named threads, if it has them
            state.position,
            buffer=None,  # the executor's tasks bound it: a worker never idles for want of one
            executor=self.executor(),
            adaptive=self.adaptive,
            read_while_starting=self.read_while_starting,
            meter=self.meter,
        )
        return DatasetCursor(reader, self.leaf.allow_nones)


class Reading(Protocol):
    """What reads a pipeline's leaves for one iterator: started with it, closed with it."""

    def start(self) -> None: ...

    def close(self) -> None: ...


class PoolCursor(BaseCursor):
    """The cursor of a pipeline whose leaves are read by `pool` (processes, or Ray actors).

    Its `next` adds the time it takes to `meter`, where given: what the
    pipeline costs the consumer, by which its readers judge the executor.
    """

    reads_in_processes = True

    def __init__(self, cursor: Cursor, pool: Reading, meter: Meter | None = None) -> None:
        self.cursor, self.pool, self.meter = cursor, pool, meter
        self.atomic = cursor.atomic  # a dead worker is replaced within the pool
        if meter is None:
            self.next = cursor.next  # type: ignore[method-assign]
            self.next_many = cursor.next_many  # type: ignore[method-assign]

    def next(self) -> Any:
        meter = self.meter
        assert meter is not None
        started = meter.clock.now()
        try:
            return self.cursor.next()
        finally:
            meter.seconds += meter.clock.now() - started

    def next_many(self, count: int) -> list[Any]:
        meter = self.meter
        assert meter is not None
        started = meter.clock.now()
        try:
            return self.cursor.next_many(count)
        finally:
            meter.seconds += meter.clock.now() - started

    def state(self) -> Any:
        return self.cursor.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.cursor,)

    def start_prefetch(self) -> None:
        self.pool.start()
        self.cursor.start_prefetch()

    def close(self) -> None:
        try:
            self.cursor.close()
        finally:
            self.pool.close()


def collect_leaves(stream: Any, leaves: list[FromDatasetStream[Any]]) -> None:
    """Appends the `from_dataset` stages of `stream`, in order, each once.

    A stage marked `reads_in_parent` (one that makes its inner streams while
    iterating, such as an interleave over a dataset of datasets) has no leaves
    for the workers: it reads here, in the parent.
    """
    if isinstance(stream, Stream) and stream.reads_in_parent:
        return
    if isinstance(stream, FromDatasetStream):
        if stream not in leaves:
            leaves.append(stream)
        return
    for parent in stream.parents:
        collect_leaves(parent, leaves)


def with_leaves(stream: Any, replace: Callable[[FromDatasetStream[Any]], Any]) -> Any:
    """`stream` rebuilt with each `from_dataset` stage replaced by `replace(stage)`.

    A nested `mp_prefetch` (or another stage marked `executes_leaves`) gives
    way to the outer one; a stage marked `reads_in_parent` is kept as it is.
    """
    if isinstance(stream, Stream) and stream.reads_in_parent:
        return stream
    if isinstance(stream, FromDatasetStream):
        return replace(stream)
    if isinstance(stream, Stream) and stream.executes_leaves:
        return with_leaves(stream.parents[0], replace)
    rebuilt = with_parents(stream, tuple(with_leaves(p, replace) for p in stream.parents))
    if rebuilt is None:
        raise TypeError(
            f"mp_prefetch cannot hand the reads below {stream.describe_stage()!r} to workers: "
            "the stage does not keep its parents in its dataclass fields."
        )
    return rebuilt


@toolz.curry
def mp_prefetch(
    num_workers: int,
    data: Stream[T] | Dataset[T],
    *,
    buffer_per_worker: int = 1,
    worker_init_fn: Callable[[int, int], Any] | None = None,
    worker_timeout: float | None = None,
    adaptive: bool = True,
) -> Stream[T]:
    """The stream with its dataset reads done ahead by `num_workers` worker processes.

    Everything map-level (the datasets under each `from_dataset`) runs in the
    workers; the stream stages above run here, on blocks that come back in
    position order. Elements and states are those of the stream itself, for
    any number of workers (0 runs everything here).

    Args:
        num_workers: Worker processes; 0 reads everything in this process.
        data: The stream (or dataset, read in order) to read.
        buffer_per_worker: The most blocks each worker computes ahead.
        worker_init_fn: Called as `worker_init_fn(worker_index, num_workers)`
            in each worker before it reads anything.
        worker_timeout: Seconds to wait for a worker's next answer (a block,
            or one position of a block read again one at a time) before the
            worker is killed and `next()` raises `WorkerError`; nothing is
            lost, and the next `next()` reads the block again with a new
            worker. None (the default) waits as long as the worker lives; at
            most 2147483 (about 24.8 days, the longest wait poll() takes).
        adaptive: Whether the workers must earn their place (the default):
            while they start, blocks are read here, so the first elements
            come as soon as without workers; and when the consumer waits
            longer for their blocks than reading them here costs (work too
            cheap to pay for its transfer), blocks are read here, with the
            same elements and states; the workers are kept and tried again
            later, less and less often. False leaves every block to the
            workers: where a crash in the per-position work must not take
            this process down, or the maps need the workers themselves. A
            `worker_init_fn` implies False (what it sets up may be what the
            maps need), and so does a `worker_timeout` (it watches workers).

    Examples:
        >>> from grainfn.fn import range, from_dataset
        >>> stream = mp_prefetch(0, from_dataset(range(4)))
        >>> from grainfn.fn import iterate
        >>> list(iterate(stream))
        [0, 1, 2, 3]
    """
    num_workers = validate.check_nonnegative_int(num_workers, "num_workers")
    buffer_per_worker = validate.check_positive_int(buffer_per_worker, "buffer_per_worker")
    if worker_init_fn is not None:
        validate.check_callable(worker_init_fn, "worker_init_fn")
    worker_timeout = check_worker_timeout(worker_timeout)
    stream = as_stream(data, "mp_prefetch")
    return PrefetchedStream(
        stream,
        num_workers,
        buffer_per_worker,
        worker_init_fn,
        worker_timeout,
        validate.check_flag(adaptive, "adaptive"),
    )
