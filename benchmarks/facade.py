"""Facade benchmarks: the Grain-style API (`import grainfn as grain`) against the core and Grain.

B1 to B4 of map_level and streams through the facade, against the core, Grain and the hand loop,
outputs compared. ReadOptions: (a) default against `num_threads=0`, (b) a 1 ms source, 16
threads against none. See docs/performance.md, "The Grain API (facade)".
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks import map_level as ml
from benchmarks.map_level import BATCH, FACADE, add_one
from benchmarks.run import run_suite
from benchmarks.streams import b3_pipeline, b3_stream, hand_b3
from grainfn import fn

CORE = "grainfn core"
IO_THREADS, IO_BUFFER, IO_SLEEP = 16, 500, 0.001  # IO_SLEEP: seconds per record


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    core: ml.Config = ml.DEFAULT  # B1, B2 and B4 have the map-level sizes (not its timer)
    b3_n: int = 200_000  # the streams suite's size
    grain_budget: float = 4.0  # seconds of timed runs per Grain case before repeats stop
    cheap_n: int = 100_000  # ReadOptions (a): range(cheap_n).map(x + 1).batch(32)
    io_records: int = 2_000  # ReadOptions (b): records of the sleeping source
    io_budget: float = 5.0
    io_warmup: int = 50  # records the I/O cases are warmed up on


DEFAULT = Config(h.Timer(repeats=5, min_time=1.5, budget=15.0, burst=1.0))
QUICK = Config(
    timer=ml.QUICK.timer,
    core=ml.QUICK,
    b3_n=20_000,
    grain_budget=1.0,
    cheap_n=10_000,
    io_records=500,
    io_budget=1.0,
    io_warmup=20,
)


def facade_row(
    c: Config, key: str, title: str, facade: Any, core: h.Case, them: h.Cases, hand: h.Case
) -> list[h.Row]:
    """One of B1 to B4: the facade, the core, Grain (both) and the hand loop, outputs compared."""
    cases = {FACADE: h.Case(lambda: list(facade), setup=core.setup), CORE: core}
    t = h.measure({**cases, **them, h.HAND: hand}, c.timer)
    out = h.results(t)
    h.require(len(out[FACADE]) == len(out[CORE]), f"{key}: facade and core: output counts differ")
    hand_values, core_values = (np.sort(np.hstack(out[k])) for k in (h.HAND, CORE))
    h.require(np.array_equal(hand_values, core_values), f"{key}: hand loop != core")
    checks = {
        f"facade = {label}": h.same_outputs(out[FACADE], out[label])
        for label in (CORE, h.GRAIN, h.GRAIN_SYNC)
    }
    return [h.Row(key, title, h.per_item(t, 1), subject=FACADE, checks=checks)]


def grains(c: Config, build: Callable[[int], Any], n: int, then: Any = None) -> h.Cases:
    return h.grain_cases(build, n, c.core.warmup_n, then, budget=c.grain_budget)


def elements(ds: Any, setup: Callable[[], Any] | None = None) -> h.Case:
    return h.Case(lambda: list(fn.elements(ds)), setup=setup)


def b1(c: Config) -> list[h.Row]:
    n = c.core.b1_n
    facade, core = ml.b1_pipeline(grainfn, n), elements(ml.core_b1(n))
    them, hand = (
        grains(c, functools.partial(ml.b1_pipeline, grain), n),
        h.Case(lambda: ml.hand_b1(n)),
    )
    return facade_row(c, "B1", f"shuffle+map+batch({BATCH})", facade, core, them, hand)


def b2(c: Config) -> list[h.Row]:
    n = c.core.b2_n
    core = fn.random_map(ml.add_random, fn.seed(0, fn.range(n)))
    them = grains(c, functools.partial(ml.b2_pipeline, grain), n)
    hand = h.Case(lambda: ml.hand_b2(core.seed, n))
    return facade_row(c, "B2", "random_map", ml.b2_pipeline(grainfn, n), elements(core), them, hand)


def b3(c: Config) -> list[h.Row]:
    n = c.b3_n
    facade = b3_pipeline(grainfn, n).to_iter_dataset().batch(BATCH)
    core = b3_stream(n)
    them = grains(c, functools.partial(b3_pipeline, grain), n, lambda ds: ds.batch(BATCH))
    title, hand = f"shuffle+filter+stream batch({BATCH})", h.Case(lambda: hand_b3(n))
    return facade_row(c, "B3", title, facade, h.Case(lambda: list(fn.iterate(core))), them, hand)


def b4(c: Config) -> list[h.Row]:
    sizes, total = c.core.b4_sizes, sum(c.core.b4_sizes)
    facade, core = ml.b4_pipeline(grainfn, sizes, total), ml.core_b4(sizes)
    them = grains(c, functools.partial(ml.b4_pipeline, grain, sizes), total)
    hand = h.Case(lambda: ml.hand_b4(sizes))
    core_case = elements(core, ml.clear_shuffle_tables)
    return facade_row(c, "B4", "mix of 3 shuffled ranges", facade, core_case, them, hand)


@dataclasses.dataclass(frozen=True)
class SleepySource:
    """An I/O-bound random-access source: record `i` is `i`, after sleeping `seconds`."""

    length: int
    seconds: float = IO_SLEEP

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> int:
        time.sleep(self.seconds)
        return index


def cheap_pipeline(c: Config) -> list[h.Row]:
    """(a) `range(n).map(x + 1).batch(32).to_iter_dataset(options)`: default vs num_threads=0."""
    ours = grainfn.MapDataset.range(c.cheap_n).map(add_one).batch(BATCH)

    def theirs(size: int) -> Any:
        return grain.MapDataset.range(size).map(add_one).batch(BATCH)

    no_threads = grainfn.ReadOptions(num_threads=0)
    cases = {
        "grainfn": h.Case(lambda: list(ours.to_iter_dataset())),
        "grainfn threads=0": h.Case(lambda: list(ours.to_iter_dataset(no_threads))),
        **grains(c, theirs, c.cheap_n),
    }
    t = h.measure(cases, c.timer)
    h.require_same("(a)", h.results(t), list(cases))
    detail = f"range({c.cheap_n:_}).map(x + 1).batch({BATCH}); grainfn = Grain, with threads or not"
    return [h.Row("ReadOptions (a)", "cheap pipeline", h.per_item(t, 1), detail=detail)]


def io_bound(c: Config) -> list[h.Row]:
    """(b) A source sleeping 1 ms per record, read with 16 threads and with none."""
    n, k, expected = c.io_records, c.io_records * 3 // 4, list(range(c.io_records))

    def read(lib: Any, threads: int, size: int) -> Any:
        options = lib.ReadOptions(num_threads=threads, prefetch_buffer_size=IO_BUFFER)
        options = options if threads else lib.ReadOptions(num_threads=0)
        return lib.MapDataset.source(SleepySource(size)).to_iter_dataset(options)

    def case(lib: Any, threads: int) -> h.Case:
        full, small = read(lib, threads, n), read(lib, threads, c.io_warmup)
        return h.Case(h.reader(full), h.reader(small), budget=c.io_budget)

    cases = {"grainfn": case(grainfn, IO_THREADS), "grainfn threads=0": case(grainfn, 0)}
    cases |= {f"Grain threads={IO_THREADS}": case(grain, IO_THREADS), h.GRAIN_SYNC: case(grain, 0)}
    t = h.measure(cases, c.timer)
    it = iter(read(grainfn, IO_THREADS, n))
    first = [next(it) for _ in range(k)]
    state = it.get_state()  # taken while the threads read ahead
    it.close()
    fresh = iter(read(grainfn, 0, n))
    fresh.set_state(state)
    out = list(h.results(t).values())
    checks = {
        "same elements with and without threads": out[0] == out[1] == expected,
        "= Grain (both)": out[2] == out[3] == expected,
        "state restores": first == expected[:k] and list(fresh) == expected[k:],
    }
    detail = (
        f"{n:,} records, `__getitem__` sleeps {IO_SLEEP * 1e3:g} ms; ReadOptions(num_threads="
        f"{IO_THREADS}, prefetch_buffer_size={IO_BUFFER}) against num_threads=0; a state taken "
        f"after {k:,} elements with threads is restored in an iterator without."
    )
    figures = h.per_item(t, 1)
    return [h.Row("ReadOptions (b)", "I/O-bound source", figures, detail=detail, checks=checks)]


def steps(c: Config) -> list[h.Step]:
    rows = {"B1": b1, "B2": b2, "B3": b3, "B4": b4}
    rows |= {"ReadOptions (a)": cheap_pipeline, "ReadOptions (b)": io_bound}
    return [h.Step(key, functools.partial(row, c)) for key, row in rows.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    b_rows = [rows[key] for key in ("B1", "B2", "B3", "B4")]
    out = [
        h.Target.at_most(f"{r.key}: facade within 1.2x of core", r.over(CORE), 1.2) for r in b_rows
    ]
    out += [
        h.Target.at_least("B1: facade >= 10x Grain default", rows["B1"].speedup(h.GRAIN), 10),
        h.Target.at_most(
            "B1: facade within 3x of the hand loop's time", rows["B1"].over(h.HAND), 3
        ),
    ]
    for r in b_rows[1:]:
        for grain_key, name in ((h.GRAIN, "default"), (h.GRAIN_SYNC, "threads=0")):
            text = f"{r.key}: facade >= 3x Grain {name}"
            out.append(h.Target.at_least(text, r.speedup(grain_key), 3))
    for r in b_rows:
        text = f"{r.key}: facade output = core = Grain (both)"
        out.append(h.Target.check(text, all(r.checks.values())))
    cheap, io, threads = (
        rows["ReadOptions (a)"].per_item,
        rows["ReadOptions (b)"],
        f"threads={IO_THREADS}",
    )
    text = "ReadOptions (a): grainfn default / threads=0 <= 1.1"
    out.append(h.Target.at_most(text, h.ratio(cheap["grainfn"], cheap["grainfn threads=0"]), 1.1))
    text = f"ReadOptions (b): grainfn {threads} >= 8x threads=0"
    out.append(h.Target.at_least(text, io.speedup("grainfn threads=0"), 8))
    text = f"ReadOptions (b): grainfn {threads} not slower than Grain {threads}"
    out.append(h.Target.at_least(text, io.speedup(f"Grain {threads}"), 1))
    return out + h.Target.checks("ReadOptions (b): {}", io.checks)


if __name__ == "__main__":
    run_suite("facade", __doc__ or "", steps, targets, DEFAULT, QUICK)
