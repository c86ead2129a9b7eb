"""A logical shard of a stream pipeline: the same stages over every `n`-th position of its leaves.

The map-level leaves of a stream (the datasets under each `from_dataset`) are
what a logical shard slices: shard `s` of `n` reads positions `s, s + n, ...`
of each leaf, and every stream stage above runs unchanged on what it reads.
So a shard is an ordinary, independent stream with its own small state, and
the shards together read each leaf position exactly once. A stream-level
`random_map` in shard `i` of `k` draws for indices `i, i + k, ...`, so no two
shards repeat each other's draws.

`mp_prefetch` and `ray_prefetch` stages inside the pipeline are taken out of the shards
(`prefetch_of` finds them): a host runs one executor for all its shards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, cast

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.stream import Stream
from grainfn._src.index import slicing
from grainfn._src.stages.slice import slice as slice_dataset


def logical_shard(
    stream: Stream[Any] | Dataset[Any], shard: int, num_shards: int, *, sequential: bool = False
) -> Stream[Any]:
    """`stream` over positions `shard, shard + num_shards, ...` of each of its leaf datasets.

    Args:
        stream: A pipeline whose data comes from datasets (`from_dataset`, or
            `to_iter_dataset()` in the Grain API); a dataset is read as
            `from_dataset(stream)`.
        shard: Which logical shard, in `[0, num_shards)`.
        num_shards: How many logical shards the leaves are cut into.
        sequential: Cut the sources instead (the datasets with no parents, below
            every map-level stage) into `num_shards` contiguous parts, and take
            part `shard` of each (Grain's `sequential_slice`).

    Raises:
        ValueError: if a stage reads data that is not a dataset (a file
            stream, a user iterator, an interleave of datasets), which has no
            positions to slice; the message names the stage.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.filter(lambda x: x % 3 != 0, fn.from_dataset(fn.range(12)))
        >>> list(fn.iterate(logical_shard(stream, 1, 4)))
        [1, 5]
        >>> list(fn.iterate(logical_shard(stream, 1, 4, sequential=True)))
        [4, 5]
    """
    num_shards = validate.check_positive_int(num_shards, "num_shards", validate.INT64_MAX)
    shard = validate.check_integer(shard, "shard")
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard must be in [0, {num_shards}), got {shard}.")
    stream = as_stream(stream, "logical_shard")
    cut = _sources_part if sequential else _strided
    return _sliced(stream, lambda ds: cut(ds, shard, num_shards), (shard, num_shards))


def positions_to_cut(stream: Stream[Any] | Dataset[Any], *, sequential: bool = False) -> int:
    """The positions logical shards of `stream` share out: its longest leaf's (or source's).

    Shard `s` of `n` reads some position only if `s` is below this number:
    with strides (the default) it reads positions `s, s + n, ...` of each
    leaf dataset; with `sequential`, the `s`-th of `n` contiguous parts of
    each source, and the parts past a source's length are empty. So shards
    from this number on read nothing, and yield nothing.

    Raises:
        ValueError: as `logical_shard`, for a stage that reads data with no
            positions to cut.

    Examples:
        >>> from grainfn import fn
        >>> mixed = fn.mix([fn.from_dataset(fn.range(3)), fn.from_dataset(fn.range(7))])
        >>> positions_to_cut(mixed)
        7
        >>> positions_to_cut(fn.from_dataset(fn.concatenate([fn.range(3), fn.range(4)])))
        7
        >>> positions_to_cut(fn.from_dataset(fn.concatenate([fn.range(3), fn.range(4)])),
        ...                  sequential=True)
        4
    """
    measure = _longest_source if sequential else _length
    leaves = _leaves(as_stream(stream, "positions_to_cut"))
    return max((measure(leaf) for leaf in leaves), default=0)


ANY_DATA_SHARDS = 1024
"""Logical shards any data may be cut into; more, only up to its positions (`check_shard_count`)."""


def check_shard_count(
    count: int,
    positions: int,
    what: str,
    data: str = "the longest dataset it reads",
    otherwise: str = "",
) -> int:
    """`count` logical shards of data of `positions` positions, unless that is too many.

    Every logical shard is a stream and a state of its own, built before the
    first element, so a count costs time and memory in proportion to it. A
    shard from `positions` on reads nothing (see `positions_to_cut`): it
    yields nothing, so a count beyond the positions only costs. Up to
    `ANY_DATA_SHARDS` are taken whatever the data (the cost is small, and
    Grain takes more workers than records); beyond that, at most
    `positions`, and a larger count is refused before anything is built.

    Args:
        count: The number of logical shards asked for.
        positions: What `positions_to_cut` says of the data.
        what: The option that asked for them, for the error.
        data: What the positions are of, for the error.
        otherwise: What else the user may do, ending the error ("" for nothing).

    Raises:
        ValueError: naming the count and the range allowed.

    Examples:
        >>> check_shard_count(1024, 10, "num_logical_shards")
        1024
        >>> check_shard_count(2000, 1500, "num_workers")
        Traceback (most recent call last):
        ...
        ValueError: num_workers=2000 is more than 1024 and more than the 1500 positions of the \
longest dataset it reads: it cuts the data into 2000 logical shards, and shards 1500 to 1999 \
would read nothing, though each is a stream and a state of its own, built before the first \
element. Use num_workers in [1, 1500].
    """
    most = max(positions, ANY_DATA_SHARDS)
    if count > most:
        raise ValueError(
            f"{what}={count} is more than {ANY_DATA_SHARDS} and more than the {positions} "
            f"positions of {data}: it cuts the data into {count} logical shards, and shards "
            f"{positions} to {count - 1} would read nothing, though each is a stream and a "
            f"state of its own, built before the first element. Use {what} in [1, {most}]."
            f"{otherwise}"
        )
    return count


def _leaves(stream: Any) -> Iterator[Dataset[Any]]:
    """The datasets a logical shard of `stream` slices (those `_sliced` cuts), in order."""
    if isinstance(stream, FromDatasetStream):
        yield stream.dataset
        return
    if stream.reads_in_parent or not stream.parents:
        raise _uncut(stream)
    for parent in stream.parents:
        yield from _leaves(parent)


def _length(ds: Dataset[Any]) -> int:
    return ds.length


def _longest_source(ds: Dataset[Any]) -> int:
    """The length of the longest dataset with no parents below `ds` (`ds`'s own if none)."""
    if not ds.parents:
        return ds.length
    return max(_longest_source(parent) for parent in ds.parents)


def prefetch_of(stream: Any) -> Stream[Any] | None:
    """The outermost executor stage of `stream`, or None: the executor a host will run.

    An executor stage (`mp_prefetch`, `ray_prefetch`) reads its leaves
    elsewhere; it is marked `executes_leaves`.
    """
    if executes_leaves(stream):
        return cast(Stream[Any], stream)
    if isinstance(stream, Dataset):
        return None
    for parent in stream.parents:
        found = prefetch_of(parent)
        if found is not None:
            return found
    return None


def executes_leaves(stream: Any) -> bool:
    """Whether `stream` is a stage whose leaves are read elsewhere (worker processes, Ray)."""
    return isinstance(stream, Stream) and stream.executes_leaves


def _strided(ds: Dataset[Any], shard: int, num_shards: int) -> Dataset[Any]:
    return slice_dataset(slice(shard, None, num_shards), ds)


def _sources_part(ds: Dataset[Any], shard: int, num_shards: int) -> Dataset[Any]:
    """`ds` rebuilt over part `shard` of `num_shards` contiguous parts of each of its sources."""
    if not ds.parents:
        part = slicing.contiguous_part(ds.length, shard, num_shards)
        return slice_dataset(slice(part.start, part.stop), ds)
    return _rebuilt(ds, tuple(_sources_part(p, shard, num_shards) for p in ds.parents))


def _sliced(
    stream: Any, cut: Callable[[Dataset[Any]], Dataset[Any]], draws: tuple[int, int]
) -> Any:
    if isinstance(stream, FromDatasetStream):
        return dataclasses.replace(stream, dataset=cut(stream.dataset))
    if executes_leaves(stream):
        return _sliced(stream.parent, cut, draws)
    if stream.draws_per_shard:  # the shard's own draws, as Grain's workers
        parent = _sliced(stream.parent, cut, draws)
        return dataclasses.replace(stream, parent=parent, draws=draws)
    if stream.reads_in_parent or not stream.parents:
        raise _uncut(stream)
    return _rebuilt(stream, tuple(_sliced(p, cut, draws) for p in stream.parents))


def _uncut(stream: Any) -> ValueError:
    """The error of a stage that reads data with no positions to cut into logical shards."""
    return ValueError(
        f"A logical shard cannot be cut from {stream.describe_stage()!r}: logical shards "
        "slice the datasets a pipeline reads, and this stage reads data that has no "
        "positions to slice. Build the pipeline over a MapDataset (to_iter_dataset()), "
        "or shard that source yourself."
    )


def _rebuilt(node: Any, parents: tuple[Any, ...]) -> Any:
    """`node` over `parents`, or a ValueError naming a stage that cannot be rebuilt."""
    rebuilt = with_parents(node, parents)
    if rebuilt is None:
        raise ValueError(
            f"A logical shard cannot be cut below {node.describe_stage()!r}: the stage does "
            "not keep its parents in its dataclass fields, so it cannot be rebuilt over them."
        )
    return rebuilt
