"""How a host's logical shards read their blocks: each on its own, or all in one dataset read.

`SeparateReads` reads each shard through its own cursor: any pipeline, any
executor (threads, worker processes). `SharedReads` serves the common case
of shards that are the same maps and filters over slices of one dataset `P`
(a shuffled MapDataset cut into logical shards, say). Their positions are
positions of `D`, those maps and filters over `P`, so one read of `D` at the
positions every shard needs next gives all their blocks. A shuffle or a
source pays a fixed cost per read, not per position, so that read costs
about what one shard's read costs, where separate reads pay it per shard.

Both hand out the same blocks and the same states: a shard's state is the
position after its last element handed out, as its own cursor says; and
with Grain's filter check, each shard's window counts the positions it read
past, as its own cursor counts them. A shared read that fails, or that waits
(on files, say) where the pipeline may read with threads, hands reading back
to the shards' own cursors at their exact states, windows included; they
raise the error as reading alone would, or read ahead in threads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from grainfn._src.core.dataset import Dataset, read_many, upstream_holes
from grainfn._src.core.executor_policy import DEFAULT_TUNING, SYSTEM_CLOCK, Clock, reading_waits
from grainfn._src.core.filter_check import FilterCheck, FilterWindow
from grainfn._src.core.reading import CheckedDatasetCursor, DatasetCursor, FromDatasetStream
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.state import DatasetPosition
from grainfn._src.core.stream import Cursor, Stream
from grainfn._src.stages.slice import SlicedDataset

Blocks = list[list[list[Any]]]
"""Each shard's block cut into chunks of `rows` elements (a short block's tail left out)."""


def replayed(stream: Stream[Any], start: Any, count: int) -> Any:
    """The state of `stream` after `count` elements from `start` (elements depend on it alone)."""
    again = stream.open(start)
    try:
        again.next_many(count)
        return again.state()
    finally:
        again.close()


def chunked(block: list[Any], rows: int) -> list[list[Any]]:
    return [block[i : i + rows] for i in range(0, len(block) - rows + 1, rows)]


class _ShardReader:
    """One logical shard read a block at a time through its own cursor.

    The shard's state is its cursor's where the block began; `state(used)`
    inside a block is the position after its `used`-th element where the
    cursor reads a dataset (it says where each element was: see
    `DatasetCursor.next_many_at`), and otherwise opens the stream there again
    and steps over the elements handed out. An iterator reading with worker
    processes asks for the state after every batch.
    """

    def __init__(self, stream: Stream[Any], state: Any) -> None:
        self.stream = stream
        self.cursor = stream.open(state)
        self.start, self.length = state, 0
        self.ends: list[int] | None = None  # the position after each element of the block

    def read_block(self, size: int) -> list[Any]:
        start = self.cursor.state()
        if type(self.cursor) is DatasetCursor:  # no filter check window to count
            block, self.ends = self.cursor.next_many_at(size)
        else:
            block, self.ends = self.cursor.next_many(size), None
        self.start, self.length = start, len(block)
        return block

    def state(self, used: int) -> Any:
        if used == self.length:
            return self.cursor.state()
        if not used:
            return self.start
        if self.ends is not None:
            return DatasetPosition(self.ends[used - 1])
        return replayed(self.stream, self.start, used)


class SeparateReads:
    """Every shard reads its blocks through its own cursor."""

    def __init__(
        self,
        streams: Sequence[Stream[Any]],
        states: Sequence[Any],
        rows: int,
        windows: Sequence[FilterWindow] | None = None,
    ) -> None:
        self.rows = rows
        self.shards = [_ShardReader(stream, state) for stream, state in zip(streams, states)]
        for shard, window in zip(self.shards, windows or ()):  # the windows go on counting
            if isinstance(shard.cursor, CheckedDatasetCursor):
                shard.cursor.window = window

    def read(self, size: int) -> Blocks:
        """The next `size` elements of every shard, in chunks of `rows`."""
        return [chunked(shard.read_block(size), self.rows) for shard in self.shards]

    def starts(self) -> tuple[Any, ...]:
        """The shards' states where their blocks began."""
        return tuple(shard.start for shard in self.shards)

    def states(self, chunks: int) -> tuple[Any, ...]:
        """The shards' states once the first `chunks` chunks of their blocks are handed out."""
        return tuple(shard.state(chunks * self.rows) for shard in self.shards)

    def cursors(self) -> tuple[Cursor, ...]:
        return tuple(shard.cursor for shard in self.shards)


@dataclasses.dataclass(frozen=True)
class SharedDataset:
    """`dataset` (maps and filters over `P`) and each shard's slice of `P`."""

    dataset: Dataset[Any]
    slices: tuple[SlicedDataset[Any], ...]
    holes: bool  # whether a filter leaves holes the shards skip
    threads: bool  # whether the shards may read ahead in threads
    check: FilterCheck  # Grain's filter check, counted where there are holes
    stage: str  # how the check names the reading, as each shard's own cursor does


def shared_dataset(components: Sequence[Any]) -> SharedDataset | None:
    """The one dataset every shard reads a slice of, under the same maps and filters; or None."""
    components = [bare(component) for component in components]
    peeled = []
    for component in components:
        found = _peeled(component)
        if found is None:
            return None
        peeled.append(found)
    layers, base = peeled[0]
    keys = [_key(layer) for layer in layers]
    if any(s.parent is not base.parent or [_key(x) for x in ls] != keys for ls, s in peeled):
        return None
    dataset: Any = base.parent
    for layer in reversed(layers):
        dataset = with_parents(layer, (dataset,))
    if len({component.check for component in components}) > 1:
        return None
    holes = upstream_holes(dataset) is not None
    threads = any(component.threads for component in components)
    first = components[0]
    stage = f"{first.describe_stage()} skipping filtered positions"
    return SharedDataset(dataset, tuple(s for _, s in peeled), holes, threads, first.check, stage)


def bare(component: Any) -> Any:
    """A shard's stream without the pipeline options around it (read already, inert here)."""
    while component.opens_as_parent:
        component = component.parent
    return component


def _peeled(component: Any) -> tuple[list[Any], SlicedDataset[Any]] | None:
    """The maps and filters over a shard's slice (top first) and the slice, if that is all it is."""
    if type(component) is not FromDatasetStream or component.allow_nones:
        return None
    layers: list[Any] = []
    dataset: Any = component.dataset  # a cut has the fields `start`, `step` and `parent`
    while dataset.elementwise:  # they commute with the slice
        layers.append(dataset)
        dataset = dataset.parent
    if not dataset.logical_shard_cut:
        return None
    return layers, dataset


def _key(layer: Any) -> tuple[type, tuple[int, ...]]:
    """The stage kind and its arguments (the function it applies), by identity."""
    arguments = [f.name for f in dataclasses.fields(layer) if f.init and f.name != "parent"]
    return type(layer), tuple(id(getattr(layer, name)) for name in arguments)


class SharedReads:
    """Every shard's block read with one read of the shared dataset (a few, past holes).

    A shard keeps the elements it read past its block (they begin its next
    one). Its state at the end of a block is the position after the block's
    last element, found in the read that completed the block. Where the
    dataset has threads and its reads are seen to wait (by `clock`, see
    `reading_waits`), each shard reads alone again, in its own threads.
    """

    def __init__(
        self,
        shared: SharedDataset,
        streams: Sequence[Stream[Any]],
        states: Sequence[DatasetPosition],
        rows: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.shared, self.rows, self.clock = shared, rows, clock
        self.streams = [bare(stream) for stream in streams]
        self.lengths = [stream.dataset.length for stream in self.streams]
        self.block_starts = tuple(states)
        self.next_starts: list[Any] = list(states)  # where the next blocks begin
        self.positions = [state.position for state in states]  # the next positions to read
        self.ready: list[list[Any]] = [[] for _ in streams]  # elements read past the blocks
        self.sizes = [0] * len(streams)  # elements of each block
        self.read_positions, self.kept = 0, 0  # for the share of holes
        self.waiting = 0
        self.separate: SeparateReads | None = None
        counts = shared.check.active and shared.holes
        self.windows = (
            [FilterWindow(shared.check, shared.stage) for _ in streams] if counts else None
        )
        self.seen: list[list[Any]] = [[] for _ in streams]  # read from the block starts on

    def read(self, size: int) -> Blocks:
        """The next `size` elements of every shard, in chunks of `rows`."""
        if self.separate is None and self.waiting >= DEFAULT_TUNING.waiting_blocks:
            self._hand_over()
        if self.separate is None:
            try:
                blocks, seen = self._read(size)
            except Exception:  # the shards' own cursors raise it where reading alone would
                self._hand_over()
            else:
                if self.windows is not None:  # outside the try: a full window's error is final
                    self._count(seen)
                return blocks
        assert self.separate is not None
        return self.separate.read(size)

    def _hand_over(self) -> None:
        self.separate = SeparateReads(self.streams, self.next_starts, self.rows, self.windows)
        self.ready, self.seen = [], []

    def _read(self, size: int) -> tuple[Blocks, list[list[Any]]]:
        ready = [list(r) for r in self.ready]
        positions = list(self.positions)
        ends: list[Any] = [None] * len(ready)  # each shard's state after its block, once known
        seen: list[list[Any]] = [[] for _ in ready]  # what the windows see, once the block is out
        while wanted := self._wanted(size, ready, positions):
            for (shard, count), segment in zip(wanted, self._fetch(wanted, positions)):
                if self.windows is not None:
                    seen[shard] += segment
                before = len(ready[shard])
                kept = [e for e in segment if e is not None] if self.shared.holes else segment
                ready[shard] += kept
                if before < size <= len(ready[shard]):
                    at = _index_of_kept(segment, size - before, len(kept), self.shared.holes)
                    ends[shard] = DatasetPosition(positions[shard] + at + 1)
                positions[shard] += count
                self.read_positions += count
                self.kept += len(kept)
        blocks, sizes = [], []
        starts = tuple(self.next_starts)
        for shard, elements in enumerate(ready):
            block, ready[shard] = elements[:size], elements[size:]
            sizes.append(len(block))
            if len(block) < size:  # the shard's end: its cursor would have read up to it
                ends[shard] = DatasetPosition(positions[shard])
            elif ends[shard] is None:  # the block was read before: only a replay says where it ends
                ends[shard] = replayed(self.streams[shard], starts[shard], size)
            blocks.append(chunked(block, self.rows))
        # Only the statistics of holes and waits changed above: a failed read moves no shard.
        self.block_starts, self.next_starts, self.sizes = starts, ends, sizes
        self.ready, self.positions = ready, positions
        return blocks, seen

    def _count(self, fetched: list[list[Any]]) -> None:
        """Hands each shard's window the positions its block read past, shard by shard."""
        assert self.windows is not None
        for shard, window in enumerate(self.windows):
            seen = self.seen[shard] + fetched[shard]
            consumed = self.next_starts[shard].position - self.block_starts[shard].position
            self.seen[shard] = seen[consumed:]
            window.see(seen[:consumed])

    def _wanted(
        self, size: int, ready: list[list[Any]], positions: list[int]
    ) -> list[tuple[int, int]]:
        """`(shard, positions to read)` of each shard short of `size` elements, not at its end."""
        holes_per_element = self.read_positions / max(1, self.kept)
        wanted = []
        for shard, elements in enumerate(ready):
            short, left = size - len(elements), self.lengths[shard] - positions[shard]
            if short > 0 and left > 0:
                count = int(short * holes_per_element * 1.1) + 2 if self.shared.holes else short
                wanted.append((shard, min(left, count)))
        return wanted

    def _fetch(self, wanted: list[tuple[int, int]], positions: list[int]) -> list[list[Any]]:
        """The elements at the wanted positions of each shard, from one read of the dataset."""
        slices = self.shared.slices
        indices = np.concatenate(
            [
                slices[shard].parent_indices(np.arange(positions[shard], positions[shard] + count))
                for shard, count in wanted
            ]
        )
        clock = self.clock
        cpu, wall = clock.cpu(), clock.now()
        elements = read_many(self.shared.dataset, indices)
        cpu, wall = clock.cpu() - cpu, clock.now() - wall
        waits = self.shared.threads and reading_waits(cpu, wall)
        self.waiting = self.waiting + 1 if waits else 0
        segments, offset = [], 0
        for _, count in wanted:
            segments.append(elements[offset : offset + count])
            offset += count
        return segments

    def starts(self) -> tuple[Any, ...]:
        """The shards' states where their blocks began."""
        return self.separate.starts() if self.separate else self.block_starts

    def states(self, chunks: int) -> tuple[Any, ...]:
        """The shards' states once the first `chunks` chunks of their blocks are handed out."""
        if self.separate is not None:
            return self.separate.states(chunks)
        used = chunks * self.rows
        return tuple(
            end if used == size else replayed(stream, start, used)
            for stream, start, end, size in zip(
                self.streams, self.block_starts, self.next_starts, self.sizes
            )
        )

    def cursors(self) -> tuple[Cursor, ...]:
        return self.separate.cursors() if self.separate else ()


def _index_of_kept(segment: list[Any], nth: int, kept: int, holes: bool) -> int:
    """The index in `segment` of its `nth` (from 1) element that is not None, of `kept` such."""
    if not holes:
        return nth - 1
    if nth <= kept // 2:
        seen = 0
        for i, element in enumerate(segment):
            seen += element is not None
            if seen == nth:
                return i
    after = kept - nth  # elements kept after the one sought: step back over them
    for i in range(len(segment) - 1, -1, -1):
        if segment[i] is not None:
            if not after:
                return i
            after -= 1
    raise AssertionError("fewer elements kept than counted")
