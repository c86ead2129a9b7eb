"""ray_prefetch: a stream whose dataset reads run on the actors of a `RayPool`.

The seam is `mp_prefetch`'s (see `grainfn._src.parallel.mp_prefetch`): the
blocks of positions of the pipeline's map-level leaves are read by the
pool's actors and taken back in position order, and the stream stages run
here. So elements and states are those of the stream itself, for any number
of actors, and a state saved with Ray restores without it (or with
`mp_prefetch`), and the other way round: the stage is transparent.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.blocks import Meter
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Cursor, PassThroughStream, Stream
from grainfn._src.parallel.deaths import check_worker_timeout
from grainfn._src.parallel.mp_prefetch import PoolCursor, PooledLeaf, collect_leaves, with_leaves
from grainfn._src.parallel.ray_pool import RayPool

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class RayPrefetchedStream(PassThroughStream):
    """The parent stream, its dataset reads done by the actors of `pool`."""

    spec_rule = SpecRule.PARENT
    transparent = True  # the same elements and states, read elsewhere
    executes_leaves = True  # a nested mp_prefetch or ray_prefetch gives way to it

    pool: RayPool = dataclasses.field(compare=False)
    adaptive: bool = True  # whether work too cheap for the actors moves to this process
    worker_timeout: float | None = None  # how it reads, like the others: not in any state

    def open(self, state: Any) -> Cursor:
        leaves: list[FromDatasetStream[Any]] = []
        collect_leaves(self.parent, leaves)
        if not leaves:  # nothing to read on actors
            return self.parent.open(state)
        # A worker_timeout watches the actors only: with one, every block goes to them.
        watched = self.worker_timeout is not None
        adaptive = self.adaptive and not watched
        datasets = [leaf.reads for leaf in leaves]  # in their named threads, if any
        session = self.pool.session(datasets, not adaptive, self.worker_timeout)

        meter = Meter()

        def pooled_leaf(leaf: FromDatasetStream[Any]) -> PooledLeaf:
            index = leaves.index(leaf)
            executor = functools.partial(session.executor, index)
            # While the pipeline goes to the actors, the reader reads here, pinned or not
            # (unless a worker_timeout watches the actors).
            return PooledLeaf(leaf, executor, adaptive, not watched, meter)

        return PoolCursor(with_leaves(self.parent, pooled_leaf).open(state), session, meter)

    def step(self, state: Any) -> tuple[Any, Any]:
        return self.parent.step(state)  # one element is not worth a round trip

    def describe_stage(self) -> str:
        return f"ray_prefetch({self.pool.num_actors} actors)"


@toolz.curry
def ray_prefetch(
    pool: RayPool,
    data: Stream[T] | Dataset[T],
    *,
    adaptive: bool = True,
    worker_timeout: float | None = None,
) -> Stream[T]:
    """The stream with its dataset reads done by the Ray actors of `pool`.

    Everything map-level (the datasets under each `from_dataset`) runs on the
    actors, a block of positions at a time, on whichever actor is free; the
    stream stages above run here, on blocks taken back in position order.
    Elements and states are those of the stream itself, for any number of
    actors, and a block lost with an actor or a node is read again, one
    position at a time: where two actors in a row die at one position (a
    record that crashes whoever reads it), `next()` raises `WorkerError`
    naming it after the elements before it, as `mp_prefetch` does. The
    numpy arrays of the elements come back without a copy, as read-only
    views of Ray's object store. See `RayPool` for where the actors run, and
    docs/distributed.md for when Ray pays.

    Args:
        pool: The `RayPool` whose actors read (it lives for the job: one pool
            serves every iterator and epoch).
        data: The stream (or dataset, read in order) to read.
        adaptive: Whether the actors must earn their place, as the workers of
            `mp_prefetch` do (the default): work too cheap to pay for a Ray
            call and its transfer is read here, with the same elements and
            states, and the actors are tried again later, less and less
            often. False leaves every block to the actors (work that must run
            on the cluster: a decoder that may crash this process, say); a
            block that failed on an actor does the same. Either way, blocks
            are read here while the pipeline goes to the actors.
        worker_timeout: Seconds to wait for a block's answer (or for each
            position's, where a block is read again one at a time) before its
            actors are killed and replaced and `next()` raises `WorkerError`;
            nothing is lost, and the next `next()` reads the block again. None
            (the default) waits for as long as the actors live. It implies
            `adaptive=False`, and every block goes to the actors from the
            first (none is read here, where nothing would watch it).

    Examples:
        >>> from grainfn import fn
        >>> pool = fn.RayPool(2, num_cpus=0)
        >>> stream = ray_prefetch(pool, fn.from_dataset(fn.range(3)))
        >>> stream.describe_stage()
        'ray_prefetch(2 actors)'
    """
    if not isinstance(pool, RayPool):
        raise TypeError(
            f"ray_prefetch takes a RayPool first (fn.RayPool(num_actors, ...)), got {pool!r} "
            f"of type {type(pool).__name__}."
        )
    if isinstance(data, Dataset):
        data = FromDatasetStream(data)
    adaptive = validate.check_flag(adaptive, "adaptive")
    worker_timeout = check_worker_timeout(worker_timeout)
    return RayPrefetchedStream(as_stream(data, "ray_prefetch"), pool, adaptive, worker_timeout)
