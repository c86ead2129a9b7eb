"""ArrayRecord benchmarks: shuffled batched reads through grainfn, Grain and array_record's reader.

20,000 records of 1 KiB in 4 shard files, read in shuffled blocks of 64: Pipeline (a batched
shuffle), Source `__getitems__`, Single records; hand loops on array_record's readers.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks.run import run_suite
from grainfn.sources import ArrayRecordDataSource, write_array_records

BATCH, SEED, SHARDS, RECORD_BYTES = 64, 0, 4, 1024
IN_THREAD, HAND_SEEK = "grainfn parallel_reads=False", "hand loop, seek + read"


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    records: int = 20_000
    singles: int = 2_000  # shuffled indices of the single-record benchmark


DEFAULT = Config(h.Timer(repeats=5, min_time=2.0, budget=12.0, burst=1.0))
QUICK = Config(h.Timer(repeats=3, min_time=0.3, budget=2.0, burst=0.2), records=4_000, singles=500)


class HandReader:
    """array_record readers of the shard files, and the index math to (file, position)."""

    def __init__(self, paths: list[str], counts: list[int]) -> None:
        from array_record.python import array_record_module

        options = "readahead_buffer_size:0,max_parallelism:0"
        self.readers = [array_record_module.ArrayRecordReader(p, options) for p in paths]
        self.starts, self.ends = np.cumsum([0, *counts[:-1]]), np.cumsum(counts)
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


@dataclasses.dataclass(frozen=True)
class Files:
    """The shard files (in `folder`), the shuffled index blocks and the hand loops' readers."""

    folder: tempfile.TemporaryDirectory[str]  # removed when the run ends
    paths: list[str]
    blocks: list[list[int]]
    hand: HandReader


def pipeline(c: Config, files: Files) -> list[h.Row]:
    import grain

    def ours(parallel_reads: bool) -> Any:
        source = ArrayRecordDataSource(files.paths, parallel_reads=parallel_reads)
        return grainfn.MapDataset.source(source).seed(SEED).shuffle().batch(BATCH)

    theirs = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(files.paths))
    theirs = theirs.seed(SEED).shuffle().batch(BATCH)

    def stacked(read: Callable[[list[int]], list[bytes]]) -> list[np.ndarray]:
        return [np.asarray(read(block)) for block in files.blocks]

    cases = {
        h.GRAINFN: h.Case(h.reader(ours(True))),
        IN_THREAD: h.Case(h.reader(ours(False))),
        h.GRAIN: h.Case(lambda: list(theirs)),
        h.HAND: h.Case(functools.partial(stacked, files.hand.read_block)),
        HAND_SEEK: h.Case(functools.partial(stacked, files.hand.seek_block)),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    h.require(len(out[h.GRAINFN]) == len(files.blocks), "pipeline: wrong number of batches")
    h.require_same("pipeline", out, (IN_THREAD, h.HAND, HAND_SEEK))
    checks = {"grainfn batches = Grain's": h.same_outputs(out[h.GRAINFN], out[h.GRAIN])}
    detail = f"{c.records:,} records of {RECORD_BYTES} bytes in {SHARDS} files; times per record"
    figures, title = h.per_item(t, c.records), f"shuffle+batch({BATCH})"
    return [h.Row("Pipeline", title, figures, c.records, "us", detail=detail, checks=checks)]


def same_records(c: Config, sources: dict[str, Callable[[Any], Any]], read: Any) -> Any:
    """Times `read(source)` for each source, checks that all read the same records."""
    cases = {key: h.Case(functools.partial(read, source)) for key, source in sources.items()}
    t = h.measure(cases, c.timer)
    out = list(h.results(t).values())
    h.require(all(records == out[0] for records in out), f"{read.__name__}: records differ")
    return t


def getitems(c: Config, files: Files) -> list[h.Row]:
    import grain

    def blocks(getitems: Callable[[list[int]], Any]) -> list[Any]:
        return [list(getitems(block)) for block in files.blocks]

    sources = {
        h.GRAINFN: ArrayRecordDataSource(files.paths).__getitems__,
        IN_THREAD: ArrayRecordDataSource(files.paths, parallel_reads=False).__getitems__,
        h.GRAIN: grain.sources.ArrayRecordDataSource(files.paths).__getitems__,
        h.HAND: files.hand.read_block,
        HAND_SEEK: files.hand.seek_block,
    }
    figures = h.per_item(same_records(c, sources, blocks), c.records)
    return [h.Row("Source `__getitems__`", f"blocks of {BATCH}", figures, c.records, "us")]


def singles(c: Config, files: Files) -> list[h.Row]:
    import grain

    order = [i for block in files.blocks for i in block][: c.singles]

    def records(getitem: Callable[[int], bytes]) -> list[bytes]:
        return [getitem(i) for i in order]

    sources = {
        h.GRAINFN: ArrayRecordDataSource(files.paths).__getitem__,
        h.GRAIN: grain.sources.ArrayRecordDataSource(files.paths).__getitem__,
        h.HAND: files.hand.read_one,
        HAND_SEEK: files.hand.seek_one,
    }
    figures = h.per_item(same_records(c, sources, records), len(order))
    detail = (
        f"{len(order):,} shuffled indices; `parallel_reads` does not apply (one record is always "
        "read in the calling thread); the batched hand loop is a one-index `read([i])`."
    )
    return [h.Row("Single records", "`source[i]`", figures, len(order), "us", detail=detail)]


def steps(c: Config) -> list[h.Step]:
    """The three benchmarks, over files written (and the readers opened) here."""
    folder = tempfile.TemporaryDirectory()
    rng = np.random.default_rng(42)
    records = [rng.bytes(RECORD_BYTES - 8) + (i + 1).to_bytes(8, "big") for i in range(c.records)]
    paths = write_array_records(records, os.path.join(folder.name, "data"), num_shards=SHARDS)
    order = list(grainfn.MapDataset.range(c.records).seed(SEED).shuffle())
    blocks = [order[i : i + BATCH] for i in range(0, c.records, BATCH)]
    hand = HandReader(paths, [len(ArrayRecordDataSource(p)) for p in paths])
    h.require(hand.read_block(blocks[0]) == [records[i] for i in blocks[0]], "bad hand loop")
    files = Files(folder, paths, blocks, hand)
    rows = {"pipeline": pipeline, "getitems": getitems, "singles": singles}
    return [h.Step(name, functools.partial(row, c, files)) for name, row in rows.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    out = [
        h.Target.at_least(f"{key}: grainfn >= 1.5x Grain", rows[key].speedup(h.GRAIN), 1.5)
        for key in ("Pipeline", "Source `__getitems__`", "Single records")
    ]
    same = all(rows["Pipeline"].checks.values())
    return [*out, h.Target.check("Pipeline: grainfn batches = Grain's", same)]


if __name__ == "__main__":
    run_suite("array_record", __doc__ or "", steps, targets, DEFAULT, QUICK)
