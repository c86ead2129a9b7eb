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

Grain's workers also hand each element over through JAX's tree functions
(their shared-memory copy maps every leaf), which rebuild its dicts with
sorted keys: `worker_copy` is that rebuild, and the round robin yields each
element so.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Any, ClassVar

from grainfn._src.core import pytree as tree
from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.grain_state import GrainState
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.shards.logical import check_shard_count, logical_shard, positions_to_cut
from grainfn._src.stages.interleave import GRAIN_STATE, InterleavedStream

WITHOUT_WORKER_ORDER = (
    " Or read in grainfn's own order (grain_worker_order=False): it builds nothing per "
    "worker, and starts no more workers than there are positions to read."
)
"""What a worker count too large for Grain's worker order may do instead."""


@dataclasses.dataclass(frozen=True, repr=False)
class GrainWorkerOrderStream(InterleavedStream):
    """The round robin over the logical shards of a pipeline, one per Grain worker.

    Each element comes as Grain's workers hand it over (`worker_copy`). Its
    state is the interleave's, which Grain's `mp_prefetch` over the same
    workers writes as its own (`grains_prefetch`).
    """

    grain_state: ClassVar[GrainState | None] = dataclasses.replace(
        GRAIN_STATE, grains_prefetch=True
    )

    def open(self, state: Any) -> Cursor:
        return _WorkerCopyCursor(super().open(state))

    def describe_stage(self) -> str:
        return f"grain_worker_order({self.count} workers)"


class _WorkerCopyCursor(BaseCursor):
    """The round robin's elements, each as `worker_copy` rebuilds it."""

    def __init__(self, parent: Cursor) -> None:
        self.parent = parent
        self.atomic = parent.atomic

    def next(self) -> Any:
        return worker_copy(self.parent.next())

    def next_many(self, count: int) -> list[Any]:
        return [worker_copy(element) for element in self.parent.next_many(count)]

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


def worker_copy(element: Any) -> Any:
    """`element` as Grain's worker processes hand it over: its dicts' keys sorted, at every level.

    Grain's workers pass each element through JAX's tree functions
    (`tree_map`), which rebuild every `dict` (and `defaultdict`) with its keys
    sorted; an `OrderedDict`, lists, tuples and namedtuples keep their order,
    a node JAX registers (where the program imported jax) is rebuilt with its
    children so, and every other value (a dict subclass too) is a leaf, as it
    is. Keys that cannot be compared (`1` and `"a"`) keep their order (Grain
    fails on them).

    Examples:
        >>> worker_copy({"b": 1, "a": [{"d": 2, "c": 3}], "o": collections.OrderedDict(z=0, y=1)})
        {'a': [{'c': 3, 'd': 2}], 'b': 1, 'o': OrderedDict([('z', 0), ('y', 1)])}
        >>> worker_copy(({"b": 1, "a": 2}, "text"))
        ({'a': 2, 'b': 1}, 'text')
    """
    try:
        return _rebuilt(element)
    except RecursionError:
        raise tree.too_deep("An element") from None


def _rebuilt(value: Any) -> Any:
    kind = type(value)
    if kind is dict or kind is collections.defaultdict:
        keys = list(value)
        with contextlib.suppress(TypeError):  # keys that do not compare: their own order
            keys = sorted(keys)
        items = [(key, _rebuilt(value[key])) for key in keys]
        if kind is dict:
            return dict(items)
        return collections.defaultdict(value.default_factory, items)
    if kind is collections.OrderedDict:
        return collections.OrderedDict((key, _rebuilt(item)) for key, item in value.items())
    if kind is list or kind is tuple:
        return kind(_rebuilt(item) for item in value)
    if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        return kind(*(_rebuilt(item) for item in value))
    node = tree.jax_children(value)
    if node is None:
        return value
    return tree.jax_rebuild(node[1], [_rebuilt(child) for child in node[0]])


def grain_worker_order(
    num_workers: int, stream: Stream[Any] | Dataset[Any], *, sequential: bool = False
) -> Stream[Any]:
    """`stream` in the order Grain's `mp_prefetch` with `num_workers` workers yields it.

    Args:
        num_workers: Grain's worker count, >= 1: up to 1024 whatever the data
            (as Grain, more workers than positions: the extra ones read
            nothing), more only up to the length of the longest dataset
            `stream` reads (of its longest source, with `sequential`). Each
            worker is a stream and a state entry of its own, built before
            the first element (see `check_shard_count`).
        stream: A pipeline whose data comes from datasets (`from_dataset`); a
            dataset is read in order.
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
    stream = as_stream(stream, "grain_worker_order")
    positions = positions_to_cut(stream, sequential=sequential)
    check_shard_count(count, positions, "num_workers", otherwise=WITHOUT_WORKER_ORDER)
    shards = tuple(logical_shard(stream, w, count, sequential=sequential) for w in range(count))
    return GrainWorkerOrderStream(shards, count)
