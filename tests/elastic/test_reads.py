"""Shared reads: the logical shards of one dataset read at once give what each read alone gives.

`SeparateReads` (each shard through its own cursor) is the reference: for
any block sizes, `SharedReads` must hand out the same blocks, the same
states at every chunk and the same block starts, and fall back to the
shards' own cursors, with their errors and their threads, where reading
fails or waits.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
from hypothesis import assume, event, given, note
from hypothesis import strategies as st

import grainfn
import grainfn.testing
from grainfn import fn
from grainfn._src.core.dataset import INFINITE
from grainfn._src.core.filter_check import NO_CHECK, FilterCheck
from grainfn._src.core.reading import CheckedDatasetCursor, FromDatasetStream
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.pushdown import into_dataset
from grainfn._src.elastic.reads import SeparateReads, SharedReads, shared_dataset
from grainfn._src.elastic.stream import elastic_batches, host_stream
from grainfn._src.shards.logical import logical_shard
from grainfn.experimental import DatasetOptions, ElasticIterator, WithOptionsIterDataset

from support.scripted_clock import ScriptedClock, charged

stream_maps_and_filters = st.lists(
    st.sampled_from(
        [fn.map(f) for f in grainfn.testing.MAPS.values()]
        + [fn.filter(f) for f in grainfn.testing.FILTERS.values()]
    ),
    max_size=3,
)


def shards_of(stream: fn.Stream, count: int) -> list[fn.Stream]:
    return [into_dataset(logical_shard(stream, s, count)) for s in range(count)]


def digests(blocks: list[list[list[Any]]]) -> list[list[list[str]]]:
    return [[[repr(e) for e in chunk] for chunk in chunks] for chunks in blocks]


checks = st.sampled_from([NO_CHECK, FilterCheck(0.9, None), FilterCheck(None, 0.4)])


def windows(reads: SeparateReads | SharedReads) -> list[tuple[int, int]] | None:
    """Each shard's filter-check window: positions until it is full, holes seen in it."""
    if isinstance(reads, SharedReads):
        found = reads.windows or []
    else:
        found = [
            s.cursor.window for s in reads.shards if isinstance(s.cursor, CheckedDatasetCursor)
        ]
    return [(w.left, w.dropped) for w in found] or None


long_datasets = grainfn.testing.datasets(
    fn.range(3000), maps=grainfn.testing.MAPS, filters=grainfn.testing.FILTERS
)
"""Pipelines long enough for a filter-check window (1000 positions per shard) to fill."""


@pytest.mark.slow
@given(
    st.one_of(grainfn.testing.datasets(), long_datasets),
    stream_maps_and_filters,
    st.sampled_from([1, 2, 3, 4]),
    st.integers(1, 3),
    st.lists(st.integers(1, 12) | st.integers(100, 400), min_size=1, max_size=8),
    checks,
)
def test_shared_reads_hand_out_the_blocks_and_states_of_separate_reads(
    ds: fn.Dataset,
    stages: list[Any],
    count: int,
    rows: int,
    sizes: list[int],
    check: FilterCheck,
) -> None:
    assume(ds.length < INFINITE)  # a shard of an endless dataset that a filter empties never ends
    stream = fn.from_dataset(ds)
    for stage in stages:
        stream = stage(stream)
    shards = shards_of(stream, count)
    if all(isinstance(shard, FromDatasetStream) for shard in shards):
        shards = [dataclasses.replace(shard, check=check) for shard in shards]
    shared = shared_dataset(shards)
    assume(shared is not None)  # a stream filter over a dataset with holes stays a stream stage
    note(f"{stream!r}\nsizes {sizes}, rows {rows}, {check}")
    starts = [shard.init() for shard in shards]
    together = SharedReads(shared, shards, starts, rows)
    alone = SeparateReads(shards, starts, rows)
    for size in (s * rows for s in sizes):
        try:
            expected = alone.read(size)
        except (ValueError, TypeError) as error:  # a ragged batch inside, or the filter check
            with pytest.raises(type(error)) as caught:
                together.read(size)
            assert str(caught.value) == str(error)
            return
        assert digests(together.read(size)) == digests(expected)
        assert together.starts() == alone.starts()
        assert windows(together) == windows(alone)
        chunks = min(len(c) for c in expected)
        for used in range(chunks + 1):
            assert together.states(used) == alone.states(used)
        if any(len(c) * rows < size for c in expected):
            return  # a shard ended
    # Reading past what is needed may reach a position that fails (a ragged batch there), and
    # then the shards' own cursors read on; otherwise every block was read together.
    event("read together" if together.separate is None else "handed over")


def keep(x: int) -> bool:
    return x % 3 != 0


def add_one(x: int) -> int:
    return x + 1


def test_the_grain_style_elastic_pipeline_reads_its_shards_together() -> None:
    ds = grainfn.MapDataset.range(3_000).seed(5).shuffle().to_iter_dataset().filter(keep)
    unchecked = WithOptionsIterDataset(
        ds.map(add_one), DatasetOptions(filter_warn_threshold_ratio=None)
    )
    shard = grainfn.ShardOptions(0, 1)
    it = ElasticIterator(unchecked, 64, shard, num_logical_shards=16)
    got = [b.tolist() for b in it]
    cursor = it._batches.iterator._cursor  # type: ignore[union-attr]
    assert isinstance(cursor.reads, SharedReads) and cursor.reads.separate is None
    order = list(grainfn.MapDataset.range(3_000).seed(5).shuffle())
    columns = [[x + 1 for x in order[s::16] if keep(x)] for s in range(16)]
    steps = min(map(len, columns)) // 4
    assert got == [[x for c in columns for x in c[4 * b : 4 * b + 4]] for b in range(steps)]


def test_a_failing_element_is_raised_as_the_shards_own_cursors_raise_it() -> None:
    def fails_at_77(x: int) -> int:
        if x == 77:
            raise ValueError("no 77 here")
        return x

    data = fn.shuffle(fn.range(200), seed=1)
    stream = fn.map(fails_at_77, fn.from_dataset(data))
    shards = shards_of(stream, 4)
    shared = shared_dataset(shards)
    assert shared is not None
    starts = [shard.init() for shard in shards]
    together = SharedReads(shared, shards, starts, 2)
    alone = SeparateReads(shards, starts, 2)
    errors = []
    for reads in (together, alone):
        with pytest.raises(ValueError) as caught:
            while True:
                reads.read(16)
        errors.append((str(caught.value), getattr(caught.value, "__notes__", [])))
    assert errors[0] == errors[1]
    assert together.separate is not None

    host = host_stream(stream, Layout(8, 4))
    it, taken = fn.iterate(host), []
    with pytest.raises(ValueError, match="no 77 here"):
        while True:
            taken.append(next(it))
    # Where the error surfaces depends on block sizes (timings): compare with the same
    # pipeline without the failure, which cannot raise it early.
    twin = fn.iterate(host_stream(fn.map(int, fn.from_dataset(data)), Layout(8, 4)))
    expected = [next(twin) for _ in taken]
    assert [b.tolist() for b in taken] == [b.tolist() for b in expected]
    assert it.state == twin.state  # nothing handed out is lost, nothing skipped
    resumed, again = fn.iterate(host, it.state), []
    with pytest.raises(ValueError, match="no 77 here"):
        while True:
            again.append(next(resumed))
    assert all(77 not in b.tolist() for b in taken + again)
    assert [b.tolist() for b in again] == [next(twin).tolist() for _ in again]


def test_reading_with_threads_gives_the_batches_of_reading_alone() -> None:
    data = fn.shuffle(fn.range(480), seed=3)
    stream = fn.map(lambda x: x, fn.from_dataset(data, threads=4))
    it = fn.iterate(host_stream(stream, Layout(8, 4)))
    got = [b.tolist() for b in it]  # wherever it was read: that is decided below
    expected = fn.iterate(elastic_batches(8, fn.from_dataset(data), num_logical_shards=4))
    assert got == [b.tolist() for b in expected]


def waiting_reads(threads: int) -> tuple[SharedReads, SeparateReads]:
    """Shared reads of 4 shards whose elements wait 0.2 ms each (on a scripted clock), and
    the reference: each shard read alone, without the clock."""
    clock = ScriptedClock()
    data = fn.shuffle(fn.range(480), seed=3)
    waiting = charged(data, clock, 2e-4, waits=True)
    shards = shards_of(fn.from_dataset(waiting, threads=threads), 4)
    shared = shared_dataset(shards)
    assert shared is not None
    starts = [shard.init() for shard in shards]
    plain = shards_of(fn.from_dataset(data), 4)
    return SharedReads(shared, shards, starts, 1, clock=clock), SeparateReads(plain, starts, 1)


def test_reading_that_waits_goes_back_to_the_shards_own_threads() -> None:
    together, alone = waiting_reads(threads=4)
    separate = []
    for _ in range(6):  # blocks of 4 elements a shard: 3.2 ms of waiting each
        assert digests(together.read(4)) == digests(alone.read(4))
        separate.append(together.separate is not None)
    assert separate == [False, False, False, True, True, True]  # after 3 waiting reads


def test_without_threads_a_waiting_read_stays_shared() -> None:
    together, alone = waiting_reads(threads=0)
    for _ in range(6):
        assert digests(together.read(4)) == digests(alone.read(4))
    assert together.separate is None


@pytest.mark.parametrize("raise_ratio", [None, 0.9])
def test_the_filter_check_counts_and_raises_as_each_shards_own_cursor(
    raise_ratio: float | None,
) -> None:
    check = FilterCheck(None, raise_ratio) if raise_ratio else FilterCheck(0.99, None)
    rare = fn.filter(lambda x: x % 20 == 0, fn.from_dataset(fn.shuffle(fn.range(40_000), seed=2)))
    shards = [dataclasses.replace(shard, check=check) for shard in shards_of(rare, 4)]
    shared = shared_dataset(shards)
    assert shared is not None
    starts = [shard.init() for shard in shards]
    together, alone = SharedReads(shared, shards, starts, 2), SeparateReads(shards, starts, 2)
    for read, size in enumerate([2, 8, 32, 64, 64, 64, 64, 64]):
        try:
            expected = alone.read(size)
        except ValueError as error:
            assert raise_ratio is not None and read > 0
            with pytest.raises(ValueError) as caught:
                together.read(size)
            assert str(caught.value) == str(error)
            assert "skipping filtered positions dropped 9" in str(error)
            return
        assert digests(together.read(size)) == digests(expected)
        assert windows(together) == windows(alone)
    assert raise_ratio is None and together.separate is None


def read_with_a_flaky_map(fails_at: int, sizes: tuple[int, ...]) -> tuple[list[Any], bool]:
    """The blocks of 4 shards read together, a map failing on its 2nd and 3rd call at one value."""
    calls: collections.Counter[int] = collections.Counter()

    def flaky(x: int) -> int:
        calls[x] += 1
        if x == fails_at and calls[x] in (2, 3):  # fails again on the one-by-one retry
            raise OSError(f"{x} is not there just now")
        return x

    stream = fn.map(flaky, fn.filter(keep, fn.from_dataset(fn.range(400))))
    shards = shards_of(stream, 4)
    shared = shared_dataset(shards)
    assert shared is not None
    together = SharedReads(shared, shards, [shard.init() for shard in shards], 1)
    return [digests(together.read(size)) for size in sizes], together.separate is not None


def test_a_read_that_fails_while_replaying_a_block_moves_no_shard() -> None:
    # A block read ahead before is found again by replaying its shard; when the
    # replay of one shard fails, the shards before it must not have moved on, or
    # the shards' own cursors, which read on, would skip their blocks.
    sizes = (30, 3, 3, 30)
    expected, _ = read_with_a_flaky_map(-1, sizes)
    handed_over = 0
    for fails_at in range(180, 200):
        got, handed = read_with_a_flaky_map(fails_at, sizes)
        assert got == expected, f"a map failing at {fails_at} changed the blocks"
        handed_over += handed
    assert handed_over  # some failures came while replaying, and reading went on alone
