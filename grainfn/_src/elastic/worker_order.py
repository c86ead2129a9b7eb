"""Grain's worker order: the elements Grain's `mp_prefetch` yields with `n` workers, in order.

Grain's `mp_prefetch` gives worker `w` of `n` the whole pipeline over
positions `w, w + n, ...` of its datasets (a logical shard: every stage runs
on its slice, filters and batches included, and a `random_map` draws for
indices `w, w + n, ...`), and yields the workers' elements in turn, passing
over a worker that ran out. So its output depends on `n`, where grainfn's
`mp_prefetch` never changes the output. `grain_worker_order(n, stream)` is
that order as an ordinary pipeline: a round robin (an interleave) over the
`n` logical shards. It runs anywhere, with or without worker processes, and
its state is the interleave's, which is also the state Grain's `mp_prefetch`
writes, so a run moves between Grain and grainfn mid-epoch with the same
batches (`IterDataset.mp_prefetch(..., grain_worker_order=True)`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.stream import Stream
from grainfn._src.elastic.shards import check_shard_count, logical_shard, positions_to_cut
from grainfn._src.stages.interleave import InterleavedStream

WITHOUT_WORKER_ORDER = (
    " Or read in grainfn's own order (grain_worker_order=False): it builds nothing per "
    "worker, and starts no more workers than there are positions to read."
)
"""What a worker count too large for Grain's worker order may do instead."""


@dataclasses.dataclass(frozen=True, repr=False)
class GrainWorkerOrderStream(InterleavedStream):
    """The round robin over the logical shards of a pipeline, one per Grain worker."""

    def describe_stage(self) -> str:
        return f"grain_worker_order({self.count} workers)"


def grain_worker_order(
    num_workers: int, stream: Stream[Any], *, sequential: bool = False
) -> Stream[Any]:
    """`stream` in the order Grain's `mp_prefetch` with `num_workers` workers yields it.

    Args:
        num_workers: Grain's worker count, >= 1: up to 1024 whatever the data
            (as Grain, more workers than positions: the extra ones read
            nothing), more only up to the length of the longest dataset
            `stream` reads (of its longest source, with `sequential`). Each
            worker is a stream and a state entry of its own, built before
            the first element (see `check_shard_count`).
        stream: A pipeline whose data comes from datasets (`from_dataset`).
        sequential: Grain's `sequential_slice`: each worker reads a contiguous
            part of the sources instead of every `num_workers`-th position.

    Raises:
        ValueError: for a bad count (one above what the data allows is
            refused before any worker's stream is built), or a stage with no
            positions to share between workers (a file stream, a user
            iterator), naming it.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.batch(2, fn.from_dataset(fn.range(7)))
        >>> [b.tolist() for b in fn.iterate(grain_worker_order(2, stream))]
        [[0, 2], [1, 3], [4, 6], [5]]
    """
    count = validate.check_positive_int(num_workers, "num_workers")
    sequential = validate.check_flag(sequential, "sequential")
    positions = positions_to_cut(stream, sequential=sequential)
    check_shard_count(count, positions, "num_workers", otherwise=WITHOUT_WORKER_ORDER)
    shards = tuple(logical_shard(stream, w, count, sequential=sequential) for w in range(count))
    return GrainWorkerOrderStream(shards, count)
