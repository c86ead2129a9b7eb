"""Facade benchmarks: the Grain-style API (`import grainfn as grain`) against the core and Grain.

B1 to B4 of `benchmarks.map_level` and `benchmarks.streams`, written through the
facade with the same functions, seeds and sizes, timed in one process: the facade
(`list(ds)`: `to_iter_dataset()` with the default ReadOptions), the core as the
core suites read it (`fn.elements`; `fn.iterate` for B3), Grain with its default
ReadOptions and with `num_threads=0` (warmed up on a small pipeline, within a
time budget of its own) and the hand-written loop. The facade's outputs are
compared with the core's and Grain's.

- B1: `MapDataset.range(200_000).seed(0).shuffle().map(x + 1).batch(32)`.
- B2: `MapDataset.range(50_000).seed(0).random_map(x + rng.integers(0, 100))`.
- B3: `MapDataset.range(200_000).seed(2).shuffle().filter(x % 3 == 0)
  .to_iter_dataset().batch(32)`.
- B4: weighted `MapDataset.mix` of three seeded, shuffled ranges, 50,000 elements.
- ReadOptions (a): `range(100_000).map(x + 1).batch(32).to_iter_dataset(options)`,
  default ReadOptions against `num_threads=0`, grainfn and Grain.
- ReadOptions (b): a source whose `__getitem__` sleeps 1 ms, read with 16 threads
  and with none, grainfn and Grain; threads must change neither the elements nor
  the states.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import map_level
from benchmarks.harness import (
    GRAIN,
    GRAIN_SYNC,
    HAND,
    Case,
    Row,
    Target,
    Timer,
    grain_cases,
    measure,
    per_item,
    ratio,
    require,
    results,
    same_outputs,
)
from benchmarks.map_level import BATCH, FACADE, add_one, add_random
from benchmarks.run import Step, run_suite
from benchmarks.streams import hand_b3, keep
from grainfn import fn

CORE = "grainfn core"
IO_THREADS, IO_BUFFER, IO_SLEEP = 16, 500, 0.001  # IO_SLEEP: seconds per record


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing (`QUICK` shrinks everything for a smoke run)."""

    core: map_level.Config  # B1, B2 and B4 have the map-level sizes
    b3_n: int  # the streams suite's size
    grain_budget: float  # seconds of timed runs per Grain implementation before repeats stop
    cheap_n: int  # ReadOptions (a): range(cheap_n).map(x + 1).batch(32)
    io_records: int  # ReadOptions (b): records of the sleeping source
    io_budget: float
    io_warmup: int  # records the I/O cases are warmed up on

    @property
    def timer(self) -> Timer:
        return self.core.timer


DEFAULT = Config(
    core=dataclasses.replace(map_level.DEFAULT, timer=Timer(5, 1.5, budget=15.0, burst=1.0)),
    b3_n=200_000,
    grain_budget=4.0,
    cheap_n=100_000,
    io_records=2_000,
    io_budget=5.0,
    io_warmup=50,
)
QUICK = Config(
    core=map_level.QUICK,
    b3_n=20_000,
    grain_budget=1.0,
    cheap_n=10_000,
    io_records=500,
    io_budget=1.0,
    io_warmup=20,
)


def facade_row(
    c: Config, key: str, title: str, facade: Any, core: Case, grains: dict, hand: Case
) -> list[Row]:
    """One of B1 to B4: the facade (with the core's setup), the core, Grain (both) and the hand
    loop, timed together; the facade's outputs are compared with the others', the hand loop's
    values with the core's as a multiset."""
    t = measure(
        {FACADE: Case(lambda: list(facade), setup=core.setup), CORE: core, **grains, HAND: hand},
        c.timer,
    )
    out = results(t)
    require(
        len(out[FACADE]) == len(out[CORE]), f"{key}: facade and core: different numbers of outputs"
    )
    require(
        np.array_equal(*(np.sort(np.hstack(out[k])) for k in (HAND, CORE))),
        f"{key}: hand loop != core",
    )
    checks = {
        f"facade = {label}": same_outputs(out[FACADE], out[label])
        for label in (CORE, GRAIN, GRAIN_SYNC)
    }
    return [Row(key, title, per_item(t, 1), subject=FACADE, checks=checks)]


def b1(c: Config) -> list[Row]:
    n = c.core.b1_n
    core = map_level.core_b1(n)
    grains = grain_cases(
        functools.partial(map_level.b1_pipeline, grain), n, c.core.warmup_n, budget=c.grain_budget
    )
    facade, hand = map_level.b1_pipeline(grainfn, n), Case(lambda: map_level.hand_b1(n))
    return facade_row(
        c,
        "B1",
        f"shuffle+map+batch({BATCH})",
        facade,
        Case(lambda: list(fn.elements(core))),
        grains,
        hand,
    )


def b2(c: Config) -> list[Row]:
    n = c.core.b2_n
    core = fn.random_map(add_random, fn.seed(0, fn.range(n)))
    grains = grain_cases(
        functools.partial(map_level.b2_pipeline, grain), n, c.core.warmup_n, budget=c.grain_budget
    )
    facade, hand = map_level.b2_pipeline(grainfn, n), Case(lambda: map_level.hand_b2(core.seed, n))
    return facade_row(
        c, "B2", "random_map", facade, Case(lambda: list(fn.elements(core))), grains, hand
    )


def b3(c: Config) -> list[Row]:
    n = c.b3_n
    facade = (
        grainfn.MapDataset.range(n).seed(2).shuffle().filter(keep).to_iter_dataset().batch(BATCH)
    )
    core = fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))

    def pipeline(size: int) -> Any:
        return grain.MapDataset.range(size).seed(2).shuffle().filter(keep)

    batch = lambda ds: ds.batch(BATCH)  # noqa: E731
    grains = grain_cases(pipeline, n, c.core.warmup_n, batch, budget=c.grain_budget)
    title, hand = f"shuffle+filter+stream batch({BATCH})", Case(lambda: hand_b3(n))
    return facade_row(c, "B3", title, facade, Case(lambda: list(fn.iterate(core))), grains, hand)


def b4(c: Config) -> list[Row]:
    sizes, total = c.core.b4_sizes, sum(c.core.b4_sizes)
    core = map_level.core_b4(sizes)
    grains = grain_cases(
        functools.partial(map_level.b4_pipeline, grain, sizes),
        total,
        c.core.warmup_n,
        budget=c.grain_budget,
    )
    facade, hand = (
        map_level.b4_pipeline(grainfn, sizes, total),
        Case(lambda: map_level.hand_b4(sizes)),
    )
    core_case = Case(lambda: list(fn.elements(core)), setup=map_level.clear_shuffle_tables)
    return facade_row(c, "B4", "mix of 3 shuffled ranges", facade, core_case, grains, hand)


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


def cheap_pipeline(c: Config) -> list[Row]:
    """(a) `range(n).map(x + 1).batch(32).to_iter_dataset(options)`: default vs num_threads=0."""
    ours = grainfn.MapDataset.range(c.cheap_n).map(add_one).batch(BATCH)

    def theirs(size: int) -> Any:
        return grain.MapDataset.range(size).map(add_one).batch(BATCH)

    cases = {
        "grainfn": Case(lambda: list(ours.to_iter_dataset())),
        "grainfn threads=0": Case(
            lambda: list(ours.to_iter_dataset(grainfn.ReadOptions(num_threads=0)))
        ),
        **grain_cases(theirs, c.cheap_n, c.core.warmup_n, budget=c.grain_budget),
    }
    t = measure(cases, c.timer)
    for label, result in results(t).items():
        require(same_outputs(t["grainfn"].result, result), f"(a): grainfn default != {label}")
    detail = f"range({c.cheap_n:_}).map(x + 1).batch({BATCH}); grainfn = Grain, with threads or not"
    return [
        Row(
            "ReadOptions (a)",
            "cheap pipeline",
            per_item(t, 1),
            detail=detail,
        )
    ]


def io_bound(c: Config) -> list[Row]:
    """(b) A source sleeping 1 ms per record, read with 16 threads and with none."""
    n, k, expected = c.io_records, c.io_records * 3 // 4, list(range(c.io_records))

    def read(lib: Any, threads: int, size: int) -> Any:
        options = lib.ReadOptions(num_threads=threads, prefetch_buffer_size=IO_BUFFER)
        options = options if threads else lib.ReadOptions(num_threads=0)
        return lib.MapDataset.source(SleepySource(size)).to_iter_dataset(options)

    def case(lib: Any, threads: int) -> Case:
        full, small = read(lib, threads, n), read(lib, threads, c.io_warmup)
        return Case(
            functools.partial(list, full), functools.partial(list, small), budget=c.io_budget
        )

    cases = {"grainfn": case(grainfn, IO_THREADS), "grainfn threads=0": case(grainfn, 0)}
    cases |= {f"Grain threads={IO_THREADS}": case(grain, IO_THREADS), GRAIN_SYNC: case(grain, 0)}
    t = measure(cases, c.timer)
    it = iter(read(grainfn, IO_THREADS, n))
    first = [next(it) for _ in range(k)]
    state = it.get_state()  # taken while the threads read ahead
    it.close()
    fresh = iter(read(grainfn, 0, n))
    fresh.set_state(state)
    out = list(results(t).values())
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
    title = "I/O-bound source"
    return [Row("ReadOptions (b)", title, per_item(t, 1), detail=detail, checks=checks)]


def steps(quick: bool) -> list[Step]:
    c = QUICK if quick else DEFAULT
    rows = {
        "B1": b1,
        "B2": b2,
        "B3": b3,
        "B4": b4,
        "ReadOptions (a)": cheap_pipeline,
        "ReadOptions (b)": io_bound,
    }
    return [Step(key, functools.partial(row, c)) for key, row in rows.items()]


def targets(rows: dict[str, Row]) -> list[Target]:
    b_rows = [rows[key] for key in ("B1", "B2", "B3", "B4")]
    out = [
        Target.at_most(f"{row.key}: facade within 1.2x of core", row.over(CORE), 1.2)
        for row in b_rows
    ]
    out.append(Target.at_least("B1: facade >= 10x Grain default", rows["B1"].speedup(GRAIN), 10))
    out.append(
        Target.at_most("B1: facade within 3x of the hand loop's time", rows["B1"].over(HAND), 3)
    )
    for row in b_rows[1:]:
        out.append(Target.at_least(f"{row.key}: facade >= 3x Grain default", row.speedup(GRAIN), 3))
        out.append(
            Target.at_least(f"{row.key}: facade >= 3x Grain threads=0", row.speedup(GRAIN_SYNC), 3)
        )
    for row in b_rows:
        out.append(
            Target.check(
                f"{row.key}: facade output = core = Grain (both)", all(row.checks.values())
            )
        )
    cheap, io = rows["ReadOptions (a)"].per_item, rows["ReadOptions (b)"]
    text = "ReadOptions (a): grainfn default / threads=0 <= 1.1"
    out.append(Target.at_most(text, ratio(cheap["grainfn"], cheap["grainfn threads=0"]), 1.1))
    threads = f"threads={IO_THREADS}"
    text = f"ReadOptions (b): grainfn {threads} >= 8x threads=0"
    out.append(Target.at_least(text, io.speedup("grainfn threads=0"), 8))
    text = f"ReadOptions (b): grainfn {threads} not slower than Grain {threads}"
    out.append(Target.at_least(text, io.speedup(f"Grain {threads}"), 1))
    out += Target.checks("ReadOptions (b): {}", io.checks)
    return out


if __name__ == "__main__":
    run_suite("facade", __doc__ or "", steps, targets)
