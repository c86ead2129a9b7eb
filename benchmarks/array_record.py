"""ArrayRecord benchmarks: shuffled batched reads through grainfn, Grain and array_record's reader.

Run from the project root:

    python -m benchmarks.array_record [--quick] [--markdown PATH]

Setup (untimed): `grainfn.sources.write_array_records` writes 20,000 records of
1 KiB (random bytes, each ending in its index) into 4 shard files in a temporary
directory, which therefore sit in the page cache: the figures are for a warm
local file system, where reading is CPU-bound.

The shuffled order is `MapDataset.range(n).seed(0).shuffle()` (the same in
grainfn and in Grain); the index blocks are its consecutive blocks of 64.

- Pipeline: one epoch of `MapDataset.source(ArrayRecordDataSource(paths)).seed(0)
  .shuffle().batch(64)`, read with `list(ds)`, for grainfn (default, and with
  `parallel_reads=False`) and for Grain on the same files. The hand loops read
  the same index blocks straight from array_record's readers and stack each
  block with `np.asarray`, as `batch` does: one batched `read(positions)` per
  file of a block ("hand loop"), or `seek(position)` + `read()` per record
  ("hand loop, seek + read").
- Source `__getitems__`: the index blocks read by each library's source alone
  (`source.__getitems__(block)`), against the same hand loops without stacking.
- Single records: `source[i]` over 2,000 shuffled indices, for both sources;
  hand loops with a one-index `read([i])` and with `seek(i)` + `read()`.

Every output is checked: grainfn's batches equal Grain's, and the records the
sources return equal the hand loop's. Times are best-of-R wall-clock, the runs
of one benchmark's implementations interleaved (see `benchmarks.common`).
Grain is imported inside the functions that use it.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

import grainfn
from benchmarks.common import Case, Timing, measure_all, ratio, require, same_outputs
from benchmarks.report import GRAIN, GRAINFN, HAND, RatioColumn, Row, Run, Targets, results_table
from grainfn.sources import ArrayRecordDataSource, write_array_records

BATCH = 64
SEED = 0
SHARDS = 4
RECORD_BYTES = 1024
IN_THREAD = "grainfn parallel_reads=False"
HAND_SEEK = "hand loop, seek + read"
COLUMNS = [GRAINFN, IN_THREAD, GRAIN, HAND, HAND_SEEK]


def grain_over(row: Row, key: str) -> float | None:
    """Grain's time divided by implementation `key`'s (above 1: `key` is faster)."""
    return ratio(row.per_item.get(GRAIN), row.per_item.get(key))


def time_over(row: Row, keys: str) -> float | None:
    """The time of the first of `keys` ("a|b") divided by the second's."""
    first, second = keys.split("|")
    return ratio(row.per_item.get(first), row.per_item.get(second))


RATIOS: list[RatioColumn] = [
    ("grainfn speed-up vs Grain", grain_over, GRAINFN),
    ("parallel_reads=False speed-up vs Grain", grain_over, IN_THREAD),
    ("grainfn / hand loop", time_over, f"{GRAINFN}|{HAND}"),
    ("parallel_reads=False / seek + read loop", time_over, f"{IN_THREAD}|{HAND_SEEK}"),
]


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    records: int
    singles: int  # shuffled indices of the single-record benchmark
    repeats: int
    min_time: float
    burst: float
    budget: float


DEFAULT = Config(records=20_000, singles=2_000, repeats=5, min_time=2.0, burst=1.0, budget=12.0)
QUICK = Config(records=4_000, singles=500, repeats=3, min_time=0.3, burst=0.2, budget=2.0)


def grain_module() -> Any:
    import grain

    return grain


def run_cases(config: Config, *cases: Case) -> list[Timing]:
    return measure_all(
        cases,
        repeats=config.repeats,
        min_time=config.min_time,
        burst=config.burst,
        budget=config.budget,
    )


# ---------------------------------------------------------------------------
# Data and hand loops.


def make_records(n: int) -> list[bytes]:
    """`n` records of `RECORD_BYTES` random bytes; the last 8 bytes are the index (never 0)."""
    rng = np.random.default_rng(42)
    return [rng.bytes(RECORD_BYTES - 8) + (i + 1).to_bytes(8, "big") for i in range(n)]


def index_blocks(n: int) -> list[list[int]]:
    """The shuffled order of `MapDataset.range(n).seed(0).shuffle()`, in blocks of `BATCH`."""
    order = list(grainfn.MapDataset.range(n).seed(SEED).shuffle())
    return [order[i : i + BATCH] for i in range(0, n, BATCH)]


class HandReader:
    """array_record readers of the shard files, and the index math to (file, position)."""

    def __init__(self, paths: list[str], counts: list[int]) -> None:
        from array_record.python import array_record_module

        options = "readahead_buffer_size:0,max_parallelism:0"
        self.readers = [array_record_module.ArrayRecordReader(p, options) for p in paths]
        self.starts = np.cumsum([0, *counts[:-1]])
        self.ends = np.cumsum(counts)
        self.start_list, self.end_list = self.starts.tolist(), self.ends.tolist()

    def read_block(self, block: list[int]) -> list[bytes]:
        """One batched `read(positions)` per file of the block, results in block order."""
        keys = np.asarray(block)
        shards = np.searchsorted(self.ends, keys, side="right")
        out: list[Any] = [None] * len(block)
        for shard in np.unique(shards).tolist():
            slots = np.flatnonzero(shards == shard)
            records = self.readers[shard].read((keys[slots] - self.starts[shard]).tolist())
            for slot, record in zip(slots.tolist(), records):
                out[slot] = record
        return out

    def read_one(self, index: int) -> bytes:
        shard = bisect.bisect_right(self.end_list, index)
        return self.readers[shard].read([index - self.start_list[shard]])[0]

    def seek_block(self, block: list[int]) -> list[bytes]:
        """`seek(position)` + `read()` for each index of the block, in order."""
        return [self.seek_one(index) for index in block]

    def seek_one(self, index: int) -> bytes:
        shard = bisect.bisect_right(self.end_list, index)
        reader = self.readers[shard]
        reader.seek(index - self.start_list[shard])
        return reader.read()

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


# ---------------------------------------------------------------------------
# The benchmarks.


def pipeline(config: Config, paths: list[str], hand: HandReader, blocks: list[list[int]]) -> Row:
    n = config.records
    print(
        f"Pipeline: MapDataset.source(ArrayRecordDataSource({SHARDS} files)).seed({SEED})"
        f".shuffle().batch({BATCH}), {n:_} records of {RECORD_BYTES} bytes",
        flush=True,
    )
    grain = grain_module()

    def ours(parallel_reads: bool) -> Any:
        source = ArrayRecordDataSource(paths, parallel_reads=parallel_reads)
        return grainfn.MapDataset.source(source).seed(SEED).shuffle().batch(BATCH)

    theirs = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
    theirs = theirs.seed(SEED).shuffle().batch(BATCH)

    def read_all(ds: Any) -> Callable[[], list[Any]]:
        return lambda: list(ds)

    def stacked(read: Callable[[list[int]], list[bytes]]) -> Callable[[], list[np.ndarray]]:
        return lambda: [np.asarray(read(block)) for block in blocks]

    timings = run_cases(
        config,
        Case("grainfn list(ds)", read_all(ours(True))),
        Case("grainfn parallel_reads=False list(ds)", read_all(ours(False))),
        Case("Grain list(ds)", lambda: list(theirs)),
        Case("hand loop, batched reads", stacked(hand.read_block)),
        Case("hand loop, seek + read", stacked(hand.seek_block)),
    )
    outputs = [t.result for t in timings]
    require(len(outputs[0]) == len(blocks), "pipeline: wrong number of batches")
    same_grain = same_outputs(outputs[0], outputs[2])
    for k in (1, 3, 4):
        require(same_outputs(outputs[0], outputs[k]), f"pipeline: {timings[k].label} differs")
    return Row(
        f"Pipeline shuffle+batch({BATCH}), {n:,} records",
        {key: t.best / n for key, t in zip(COLUMNS, timings)},
        unit="us",
        items=n,
        check=f"{'=' if same_grain else '!='} Grain, = hand loops",
        passed=same_grain,
    )


def getitems(config: Config, paths: list[str], hand: HandReader, blocks: list[list[int]]) -> Row:
    n = config.records
    print(f"Source __getitems__: {len(blocks)} shuffled blocks of {BATCH} indices", flush=True)
    grain = grain_module()
    ours = ArrayRecordDataSource(paths)
    in_thread = ArrayRecordDataSource(paths, parallel_reads=False)
    theirs = grain.sources.ArrayRecordDataSource(paths)

    def read_all(read: Callable[[list[int]], Any]) -> Callable[[], list[Any]]:
        return lambda: [list(read(block)) for block in blocks]

    timings = run_cases(
        config,
        Case("grainfn __getitems__", read_all(ours.__getitems__)),
        Case("grainfn parallel_reads=False __getitems__", read_all(in_thread.__getitems__)),
        Case("Grain __getitems__", read_all(theirs.__getitems__)),
        Case("hand loop, batched reads", read_all(hand.read_block)),
        Case("hand loop, seek + read", read_all(hand.seek_block)),
    )
    outputs = [t.result for t in timings]
    require(all(out == outputs[0] for out in outputs), "__getitems__: records differ")
    return Row(
        f"Source `__getitems__`, blocks of {BATCH}",
        {key: t.best / n for key, t in zip(COLUMNS, timings)},
        unit="us",
        items=n,
        check="= Grain, = hand loops",
    )


def singles(config: Config, paths: list[str], hand: HandReader, blocks: list[list[int]]) -> Row:
    order = [i for block in blocks for i in block][: config.singles]
    print(f"Single records: source[i] for {len(order):_} shuffled indices", flush=True)
    grain = grain_module()
    ours = ArrayRecordDataSource(paths)
    theirs = grain.sources.ArrayRecordDataSource(paths)

    def read_each(read: Callable[[int], bytes]) -> Callable[[], list[bytes]]:
        return lambda: [read(i) for i in order]

    timings = run_cases(
        config,
        Case("grainfn source[i]", read_each(ours.__getitem__)),
        Case("Grain source[i]", read_each(theirs.__getitem__)),
        Case("hand loop, read([i])", read_each(hand.read_one)),
        Case("hand loop, seek + read", read_each(hand.seek_one)),
    )
    outputs = [t.result for t in timings]
    require(all(out == outputs[0] for out in outputs), "single records differ")
    keys = [GRAINFN, GRAIN, HAND, HAND_SEEK]
    return Row(
        f"Single records `source[i]`, {len(order):,} shuffled",
        {key: t.best / len(order) for key, t in zip(keys, timings)},
        unit="us",
        items=len(order),
        check="= Grain, = hand loops",
        note=(
            "Single records: `parallel_reads` does not apply (one record is always read in "
            "the calling thread); the batched hand loop is a one-index `read([i])`."
        ),
    )


def targets(rows: dict[str, Row]) -> Targets:
    out = Targets()
    out.at_least("Pipeline: grainfn >= 1.5x Grain", rows["pipeline"].speedup(GRAIN), 1.5)
    out.at_least(
        "Source `__getitems__`: grainfn >= 1.5x Grain", rows["getitems"].speedup(GRAIN), 1.5
    )
    out.at_least("Single records: grainfn >= 1.5x Grain", rows["singles"].speedup(GRAIN), 1.5)
    out.add("Pipeline: grainfn batches = Grain's", rows["pipeline"].check, rows["pipeline"].passed)
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.array_record", __doc__, "grainfn ArrayRecord benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    with tempfile.TemporaryDirectory() as folder:
        records = make_records(config.records)
        paths = write_array_records(records, os.path.join(folder, "data"), num_shards=SHARDS)
        counts = [len(ArrayRecordDataSource(p)) for p in paths]
        blocks = index_blocks(config.records)
        hand = HandReader(paths, counts)
        require(hand.read_block(blocks[0]) == [records[i] for i in blocks[0]], "bad hand loop")
        try:
            rows = {
                "pipeline": run.section("pipeline", lambda: pipeline(config, paths, hand, blocks)),
                "getitems": run.section("getitems", lambda: getitems(config, paths, hand, blocks)),
                "singles": run.section("singles", lambda: singles(config, paths, hand, blocks)),
            }
        finally:
            hand.close()
    run.stop_clock()

    report = run.report
    report.add(
        f"{config.records:,} records of {RECORD_BYTES} bytes in {SHARDS} ArrayRecord files "
        f"(group_size:1), warm in the page cache; shuffled with seed {SEED}; times per record."
    )
    report.add()
    report.add(results_table(list(rows.values()), COLUMNS, RATIOS, check="outputs checked"))
    report.add()
    notes = [
        "Speed-ups are Grain's time divided by grainfn's (default, or parallel_reads=False). "
        "The last two ratios are time ratios, below 1 where grainfn is faster: the default "
        "against the hand loop with batched reads, parallel_reads=False against the hand loop "
        "with seek + read. The hand loops call array_record's readers directly "
        "(readahead_buffer_size:0, max_parallelism:0) with the same index blocks.",
        f"Best of the timed runs: each implementation runs at least {config.repeats} times "
        f"and {config.min_time:g} s, starting no new run past {config.budget:g} s.",
        *(row.note for row in rows.values() if row.note),
    ]
    report.add_notes(notes)
    run.finish(targets(rows))


if __name__ == "__main__":
    main()
