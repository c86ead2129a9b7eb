"""A logical shard of a stream pipeline: the same stages over every `n`-th position of its leaves.

The map-level leaves of a stream (the datasets under each `from_dataset`) are
what a logical shard slices: shard `s` of `n` reads positions `s, s + n, ...`
of each leaf, and every stream stage above runs unchanged on what it reads.
So a shard is an ordinary, independent stream with its own small state, and
the shards together read each leaf position exactly once.

`mp_prefetch` stages inside the pipeline are taken out of the shards
(`prefetch_of` finds them): a host runs one worker pool for all its shards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.stream import Stream
from grainfn._src.parallel.prefetch import PrefetchedStream
from grainfn._src.stages.slice import slice as slice_dataset


def logical_shard(stream: Stream[Any], shard: int, num_shards: int) -> Stream[Any]:
    """`stream` over positions `shard, shard + num_shards, ...` of each of its leaf datasets.

    Args:
        stream: A pipeline whose data comes from datasets (`from_dataset`, or
            `to_iter_dataset()` in the Grain API).
        shard: Which logical shard, in `[0, num_shards)`.
        num_shards: How many logical shards the leaves are cut into.

    Raises:
        ValueError: if a stage reads data that is not a dataset (a file
            stream, a user iterator, an interleave of datasets), which has no
            positions to slice; the message names the stage.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.filter(lambda x: x % 3 != 0, fn.from_dataset(fn.range(12)))
        >>> list(fn.iterate(logical_shard(stream, 1, 4)))
        [1, 5]
    """
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard must be in [0, {num_shards}), got {shard}.")
    return _sliced(stream, shard, num_shards)


def prefetch_of(stream: Any) -> PrefetchedStream | None:
    """The outermost `mp_prefetch` stage of `stream`, or None: the workers a host will run."""
    if isinstance(stream, PrefetchedStream):
        return stream
    if isinstance(stream, Dataset):
        return None
    for parent in stream.parents:
        found = prefetch_of(parent)
        if found is not None:
            return found
    return None


def _sliced(stream: Any, shard: int, num_shards: int) -> Any:
    if isinstance(stream, FromDatasetStream):
        dataset = slice_dataset(slice(shard, None, num_shards), stream.dataset)
        return dataclasses.replace(stream, dataset=dataset)
    if isinstance(stream, PrefetchedStream):
        return _sliced(stream.parent, shard, num_shards)
    if stream.reads_in_parent or not stream.parents:
        raise ValueError(
            f"A logical shard cannot be cut from {stream.describe_stage()!r}: logical shards "
            "slice the datasets a pipeline reads, and this stage reads data that has no "
            "positions to slice. Build the pipeline over a MapDataset (to_iter_dataset()), "
            "or shard that source yourself."
        )
    rebuilt = with_parents(stream, tuple(_sliced(p, shard, num_shards) for p in stream.parents))
    if rebuilt is None:
        raise ValueError(
            f"A logical shard cannot be cut below {stream.describe_stage()!r}: the stage does "
            "not keep its parents in its dataclass fields, so it cannot be rebuilt over them."
        )
    return rebuilt
