"""elastic_batches: one host's rows of each global batch, cut from logical shards.

A pipeline is cut into `num_logical_shards` independent streams
(`logical_shard`); the global batch takes the next `global_batch_size //
num_logical_shards` elements of each, in shard order. A host runs only the
logical shards it owns (see `grainfn._src.elastic.layout`) and yields their
rows stacked: its contiguous slice of the one global batch. The global
sequence depends on the pipeline and the number of logical shards alone, so
it is the same for every host count that divides it, and the host's state is
the states of its shards, which another host count can take up.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, ClassVar, NamedTuple, cast

import toolz

from grainfn._src.core import pytree as tree
from grainfn._src.core import state as records
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.blocks import BlockSizer
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.pushdown import into_dataset
from grainfn._src.elastic.reads import Blocks, SeparateReads, SharedReads, shared_dataset
from grainfn._src.elastic.rows import RowsCursor, whole_dataset
from grainfn._src.parallel.mp_prefetch import PrefetchedStream
from grainfn._src.shards.logical import (
    check_shard_count,
    executes_leaves,
    logical_shard,
    positions_to_cut,
    prefetch_of,
)
from grainfn._src.stages.zip import check_components


@records.register
class ElasticState(NamedTuple):
    """State of `elastic_batches`: global batches taken, whether it ended, its shards' states."""

    step: int
    stopped: bool
    components: tuple[Any, ...]


@dataclasses.dataclass(frozen=True, repr=False)
class ElasticStream(Stream[Any]):
    """One host's rows of each global batch: `rows_per_shard` elements of each of its shards."""

    spec_rule = SpecRule.BATCHED
    batch_fn: ClassVar[None] = None  # what the BATCHED rule reads: rows stacked,
    drop_remainder: ClassVar[bool] = True  # and every global batch whole

    components: tuple[Stream[Any], ...]
    layout: Layout

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.components

    @property
    def batch_size(self) -> int:
        """The rows of each global batch this host yields."""
        return len(self.layout.rows)

    def init(self) -> ElasticState:
        return ElasticState(0, False, tuple(c.init() for c in self.components))

    def open(self, state: ElasticState) -> Cursor:
        dataset = whole_dataset(self.components, self.layout)
        at = records.DatasetPosition(state.step * self.layout.rows_per_shard)
        if dataset is not None and not state.stopped and set(state.components) == {at}:
            return _RowsElasticCursor(self.components, dataset, self.layout, state.step)
        rows, shared = self.layout.rows_per_shard, shared_dataset(self.components)
        if shared is None:
            reads: SeparateReads | SharedReads = SeparateReads(
                self.components, state.components, rows
            )
        else:
            reads = SharedReads(shared, self.components, state.components, rows)
        return _ElasticCursor(reads, state.step, state.stopped)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, ElasticState, self.describe_stage(), path)
        check_components(self.components, state.components, path)
        rows = self.layout.rows_per_shard  # each step takes that many of every shard
        bounds = [c.most_delivered(s) for c, s in zip(self.components, state.components)]
        steps = min((b // rows for b in bounds if b is not None), default=None)
        records.check_at_most(state.step, steps, path, "step", "the shards' states")

    def most_delivered(self, state: ElasticState) -> int:
        return state.step

    def describe_stage(self) -> str:
        layout = self.layout
        return (
            f"elastic_batches({layout.global_batch_size}, logical shards "
            f"{layout.shards.start}-{layout.shards.stop - 1} of {layout.num_logical_shards})"
        )


READ_AHEAD = 512
"""The most elements a shard reads at once. The first read takes one batch's rows,
so the first batch comes soon whatever an element costs; the reads grow while
they are cheap and shrink when slow (`BlockSizer`, timing each shard's part)."""


class _ElasticCursor(BaseCursor):
    """Global batches from shards that read their blocks in step with each other.

    Every shard reads a block of the same number of rows at the same time, so
    the `k`-th batch since the last read is the `k`-th chunk of rows of every
    shard. A shard whose block came back short has ended: the batches its
    chunks fill come out, and then the stream ends.
    """

    def __init__(self, reads: SeparateReads | SharedReads, step: int, stopped: bool) -> None:
        self.reads, self.step, self.stopped = reads, step, stopped
        self.blocks: Blocks = []
        self.chunk, self.chunks = 0, 0  # the next chunk of every block, and how many there are
        self.sizer = BlockSizer(READ_AHEAD)
        self.closed_at: ElasticState | None = None

    def next(self) -> Any:
        if self.chunk == self.chunks:
            self._read_blocks()
        chunk, elements = self.chunk, []
        for chunks in self.blocks:
            elements += chunks[chunk]
        self.chunk = chunk + 1
        self.step += 1
        return tree.stack(elements)

    def next_many(self, count: int) -> list[Any]:
        """The next `count` batches, read in blocks of at most that many batches.

        A block's read fails as a whole when one element of it fails, so a
        block longer than asked could raise an error that lies past the
        batches wanted. Reading no further keeps a replay exact: the iterator
        finds its state after an error by stepping over the batches it handed
        out, which were all read before, and must not meet the error again.
        """
        out: list[Any] = []
        try:
            while len(out) < count:
                if self.chunk == self.chunks:
                    self._read_blocks(most=count - len(out))
                out.append(self.next())
        except StopIteration:
            pass
        return out

    def _read_blocks(self, most: int | None = None) -> None:
        """Reads every shard's next block: as many batches as the sizer says, up to `most`."""
        longest = max((len(chunks) for chunks in self.blocks), default=0)
        if self.stopped or longest > self.chunks:  # a shard had fewer rows left than the others
            self.stopped = True
            raise StopIteration
        rows = self.reads.rows
        batches = max(1, self.sizer.start(at_least=rows) // rows)
        size = rows * (batches if most is None else min(batches, most))
        self.blocks = self.reads.read(size)
        self.sizer.done(parts=len(self.blocks))
        self.chunk, self.chunks = 0, min(len(chunks) for chunks in self.blocks)
        if not self.chunks:
            self.stopped = True
            raise StopIteration

    def state(self) -> ElasticState:
        if self.closed_at is not None:
            return self.closed_at
        if self.stopped:  # nothing is read past the end: any of its states will do, so no replay
            return ElasticState(self.step, True, self.reads.starts())
        return ElasticState(self.step, False, self.reads.states(self.chunk))

    def children(self) -> tuple[Cursor, ...]:
        return self.reads.cursors()

    def close(self) -> None:
        try:
            # A shard's state may need its stream read again: now. If that read fails,
            # the iterator finds the state from its mark.
            with contextlib.suppress(Exception):
                if self.closed_at is None:
                    self.closed_at = self.state()
        finally:
            super().close()


class _RowsElasticCursor(RowsCursor):
    """A map-level pipeline's host batches read as one dataset (see `grainfn._src.elastic.rows`)."""

    def state(self) -> ElasticState:
        step, positions = self.positions()
        return ElasticState(step, self.stopped, positions)


@toolz.curry
def elastic_batches(
    global_batch_size: int,
    data: Stream[Any] | Dataset[Any],
    *,
    num_logical_shards: int,
    host: int = 0,
    num_hosts: int = 1,
) -> Stream[Any]:
    """This host's rows of each global batch of `data`, cut into `num_logical_shards` shards.

    Logical shard `s` is `data` over positions `s, s + num_logical_shards, ...`
    of its leaf datasets, an independent stream; global batch `b` stacks the
    next `global_batch_size // num_logical_shards` elements of shards 0, 1, ...
    in turn. Host `host` of `num_hosts` yields only the rows of the shards it
    owns (a contiguous slice of each global batch), so the hosts' rows stacked
    in host order are the same global batches for every `num_hosts` dividing
    `num_logical_shards`. The stream ends before the first global batch that
    one of the host's shards cannot fill. An `mp_prefetch` inside `data` runs
    once for the host, with its workers reading for all of its shards.

    Args:
        global_batch_size: Rows in a global batch; a multiple of `num_logical_shards`.
        data: An unbatched stream (or a dataset) whose data comes from datasets.
        num_logical_shards: How many streams the pipeline is cut into; fixed for
            a run, since the data depends on it. Up to 1024 whatever the data;
            more only up to the length of the longest dataset `data` reads
            (see `check_shard_count`).
        host: This host's index in `[0, num_hosts)`.
        num_hosts: Hosts sharing each global batch; a divisor of `num_logical_shards`.

    Raises:
        ValueError: for a layout the counts do not allow (see `Layout`), more
            than 1024 logical shards and more than the data has positions
            (refused before any shard is built, so that a huge count costs
            nothing), or a stage with no positions to cut (see `logical_shard`).

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(16))
        >>> one = elastic_batches(4, stream, num_logical_shards=2)
        >>> [b.tolist() for b in fn.iterate(one)][:2]
        [[0, 2, 1, 3], [4, 6, 5, 7]]
        >>> second_of_two = elastic_batches(4, stream, num_logical_shards=2, host=1, num_hosts=2)
        >>> [b.tolist() for b in fn.iterate(second_of_two)][:2]
        [[1, 3], [5, 7]]
    """
    layout = Layout(global_batch_size, num_logical_shards, host, num_hosts)
    stream = as_stream(data, "elastic")
    return host_stream(stream, layout)


def host_stream(stream: Stream[Any], layout: Layout) -> Stream[Any]:
    """The host's `ElasticStream` of `stream` for `layout`, under the pipeline's executor stage.

    Raises:
        ValueError: if `layout` has more logical shards than `check_shard_count`
            allows for `stream`, or `stream` cannot be cut (`logical_shard`).
    """
    positions = positions_to_cut(stream)
    count = check_shard_count(layout.num_logical_shards, positions, "num_logical_shards")
    shards = tuple(into_dataset(logical_shard(stream, s, count)) for s in layout.shards)
    batches = ElasticStream(shards, layout)
    prefetch = prefetch_of(stream)
    if prefetch is None:
        return batches
    return dataclasses.replace(cast(Any, prefetch), parent=batches)


def with_workers(stream: Stream[Any], num_workers: int, **options: Any) -> Stream[Any]:
    """`stream` under one `mp_prefetch` of `num_workers`.

    It replaces the executor stage `stream` has (`mp_prefetch` or
    `ray_prefetch`, if any): the options asked for win.
    """
    if executes_leaves(stream):
        stream = cast(Any, stream).parent
    return PrefetchedStream(stream, num_workers, **options)
