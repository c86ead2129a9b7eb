"""Facade benchmarks: the Grain-style API (`import grainfn as grain`) against the core and Grain.

Run from the project root:

    python -m benchmarks.facade [--quick] [--markdown PATH]

Part 1 writes B1 to B4 of `benchmarks.map_level` and `benchmarks.streams` through
the facade, with the same functions, seeds and sizes, and times in this one
process: the facade (iterating the facade dataset, which reads through
`to_iter_dataset()` with the default ReadOptions), the core (`grainfn.fn`,
exactly as the core benchmarks read it: `fn.elements` for B1, B2, B4 and
`fn.iterate` for B3), Grain with its default ReadOptions, Grain with
`ReadOptions(num_threads=0)` and the hand-written loop.

- B1: `MapDataset.range(200_000).seed(0).shuffle().map(x + 1).batch(32)`, one epoch.
- B2: `MapDataset.range(50_000).seed(0).random_map(x + rng.integers(0, 100))`.
- B3: `MapDataset.range(200_000).seed(2).shuffle().filter(x % 3 == 0)
  .to_iter_dataset().batch(32)`: a stream batch after a filter.
- B4: weighted `MapDataset.mix` of three seeded, shuffled ranges, 50,000 elements.

Part 2 measures ReadOptions: (a) a cheap pipeline (`range.map.batch`) through
`to_iter_dataset()` with the default ReadOptions against `num_threads=0`, for
grainfn and Grain; (b) an I/O-bound source whose `__getitem__` sleeps 1 ms, read
with 16 threads against none, for grainfn and Grain, with checks that threads
change neither the elements nor the states.

Times are best-of-R wall-clock, the runs of a benchmark's implementations
interleaved (see `benchmarks.common`). Every output is checked outside the
timed region, from the results of the timed runs.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import map_level
from benchmarks.common import Case, Timing, fmt_ratio, ratio, require, same_outputs
from benchmarks.map_level import (
    B4_WEIGHTS,
    BATCH,
    add_random,
    clear_shuffle_tables,
    hand_b1,
    hand_b2,
    hand_b4,
    run_cases,
)
from benchmarks.report import GRAIN, GRAIN_SYNC, HAND, RatioColumn, Row, Run, Targets, results_table
from benchmarks.streams import hand_b3
from grainfn import fn

FACADE, CORE = "grainfn facade", "grainfn core"
COLUMNS = [FACADE, CORE, GRAIN, GRAIN_SYNC, HAND]
RATIOS: list[RatioColumn] = [
    ("facade / core", Row.over, CORE),
    ("speed-up vs Grain default", Row.speedup, GRAIN),
    ("vs Grain threads=0", Row.speedup, GRAIN_SYNC),
    ("facade / hand loop", Row.over, HAND),
]
IO_THREADS = 16
IO_BUFFER = 500
IO_SLEEP = 0.001  # seconds per record of the I/O-bound source


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run).

    `core` is `benchmarks.map_level`'s configuration, so B1, B2 and B4 have the
    core benchmarks' sizes, and Grain is warmed up on the same small pipelines.
    """

    core: map_level.Config
    b3_n: int  # benchmarks.streams' size
    grain_budget: float  # seconds of timed runs per Grain implementation before repeats stop
    cheap_n: int  # ReadOptions (a): range(cheap_n).map(x + 1).batch(32)
    io_records: int  # ReadOptions (b): records of the sleeping source
    io_budget: float
    io_warmup: int  # records the I/O cases are warmed up on


DEFAULT = Config(
    core=dataclasses.replace(map_level.DEFAULT, min_time=1.5),
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


def add_one(x: int) -> int:
    return x + 1


def keep(x: int) -> bool:
    return x % 3 == 0


def grain_case(config: Config, label: str, build: Callable[[int], Any], n: int, sync: bool) -> Case:
    """Grain's epoch of `build(n)` as in `benchmarks.map_level`, within `grain_budget`."""
    case = map_level.grain_case(config.core, label, build, n, sync)
    return dataclasses.replace(case, budget=config.grain_budget)


def make_row(name: str, timings: dict[str, Timing]) -> Row:
    """A row of part 1: best seconds per implementation, the facade's output compared."""
    facade = timings[FACADE].result
    same = {
        "core": same_outputs(facade, timings[CORE].result),
        "Grain default": same_outputs(facade, timings[GRAIN].result),
        "Grain threads=0": same_outputs(facade, timings[GRAIN_SYNC].result),
    }
    return Row(
        name,
        {k: t.best for k, t in timings.items()},
        subject=FACADE,
        check=", ".join(f"{'=' if ok else '!='} {other}" for other, ok in same.items()),
        passed=all(same.values()),
    )


def read_all(ds: Any) -> Callable[[], list[Any]]:
    """A function that reads one epoch of the facade or Grain dataset `ds` into a list."""
    return lambda: list(ds)


# ---------------------------------------------------------------------------
# Part 1: B1 to B4 through the facade.


def b1(config: Config) -> Row:
    n = config.core.b1_n
    print(f"B1: MapDataset.range({n:_}).seed(0).shuffle().map(x + 1).batch({BATCH})", flush=True)
    facade = grainfn.MapDataset.range(n).seed(0).shuffle().map(add_one).batch(BATCH)
    core = fn.batch(BATCH, fn.map(add_one, fn.shuffle(fn.seed(0, fn.range(n)))))

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).shuffle().map(add_one).batch(BATCH)

    timings = run_cases(
        config.core,
        Case("B1 facade list(ds)", lambda: list(facade)),
        Case("B1 core fn.elements", lambda: list(fn.elements(core))),
        grain_case(config, "B1", build_grain, n, sync=False),
        grain_case(config, "B1", build_grain, n, sync=True),
        Case("B1 hand loop", lambda: hand_b1(n)),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == math.ceil(n / BATCH), "B1: wrong number of batches")
    values = np.sort(np.concatenate(results[HAND].result))
    require(np.array_equal(values, np.arange(1, n + 1)), "B1: hand loop lost elements")
    return make_row(f"B1 shuffle+map+batch({BATCH}), {n:,} elements", results)


def b2(config: Config) -> Row:
    n = config.core.b2_n
    print(f"B2: MapDataset.range({n:_}).seed(0).random_map(x + rng.integers(0, 100))", flush=True)
    facade = grainfn.MapDataset.range(n).seed(0).random_map(add_random)
    core = fn.random_map(add_random, fn.seed(0, fn.range(n)))
    stage_seed = core.seed  # the seed fn.seed(0) derives for this stage

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).random_map(add_random)

    timings = run_cases(
        config.core,
        Case("B2 facade list(ds)", lambda: list(facade)),
        Case("B2 core fn.elements", lambda: list(fn.elements(core))),
        grain_case(config, "B2", build_grain, n, sync=False),
        grain_case(config, "B2", build_grain, n, sync=True),
        Case("B2 hand loop", lambda: hand_b2(stage_seed, n)),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == n, "B2: wrong number of elements")
    require(results[HAND].result == results[CORE].result, "B2: hand loop != core")
    return make_row(f"B2 random_map, {n:,} elements", results)


def b3(config: Config) -> Row:
    n = config.b3_n
    print(
        f"B3: MapDataset.range({n:_}).seed(2).shuffle().filter(x % 3 == 0)"
        f".to_iter_dataset().batch({BATCH})",
        flush=True,
    )
    facade = (
        grainfn.MapDataset.range(n).seed(2).shuffle().filter(keep).to_iter_dataset().batch(BATCH)
    )
    core = fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))

    def grain_b3(sync: bool) -> Case:
        options = grain.ReadOptions(num_threads=0) if sync else grain.ReadOptions()

        def read(size: int) -> list[Any]:
            ds = grain.MapDataset.range(size).seed(2).shuffle().filter(keep)
            return list(ds.to_iter_dataset(options).batch(BATCH))

        small = config.core.warmup_n
        return Case(
            f"B3 Grain {'threads=0' if sync else 'default'}",
            lambda: read(n),
            warmup=lambda: read(small),
            budget=config.grain_budget,
        )

    timings = run_cases(
        config.core,
        Case("B3 facade list(ds)", lambda: list(facade)),
        Case("B3 core fn.iterate", lambda: list(fn.iterate(core))),
        grain_b3(sync=False),
        grain_b3(sync=True),
        Case("B3 hand loop", lambda: hand_b3(n)),
    )
    results = dict(zip(COLUMNS, timings))
    kept = len(range(0, n, 3))
    require(len(results[FACADE].result) == math.ceil(kept / BATCH), "B3: wrong number of batches")
    values = np.sort(np.concatenate(results[HAND].result))
    require(np.array_equal(values, np.arange(0, n, 3)), "B3: hand loop lost elements")
    return make_row(f"B3 shuffle+filter, stream batch({BATCH}), {n:,} elements", results)


def b4(config: Config) -> Row:
    sizes = config.core.b4_sizes
    total = sum(sizes)
    print(
        f"B4: MapDataset.mix of range({sizes[0]:_}), range({sizes[1]:_}), range({sizes[2]:_}), "
        f"each .seed(k).shuffle(), weights {list(B4_WEIGHTS)}",
        flush=True,
    )
    facade = grainfn.MapDataset.mix(
        [grainfn.MapDataset.range(s).seed(k).shuffle() for k, s in enumerate(sizes)],
        list(B4_WEIGHTS),
    )
    core = fn.mix(
        [fn.shuffle(fn.seed(k, fn.range(s))) for k, s in enumerate(sizes)], list(B4_WEIGHTS)
    )

    def build_grain(n: int) -> Any:
        scale = n / total
        parts = [
            grain.MapDataset.range(round(s * scale)).seed(k).shuffle() for k, s in enumerate(sizes)
        ]
        return grain.MapDataset.mix(parts, list(B4_WEIGHTS))

    timings = run_cases(
        config.core,
        Case("B4 facade list(ds)", lambda: list(facade), setup=clear_shuffle_tables),
        Case("B4 core fn.elements", lambda: list(fn.elements(core)), setup=clear_shuffle_tables),
        grain_case(config, "B4", build_grain, total, sync=False),
        grain_case(config, "B4", build_grain, total, sync=True),
        Case("B4 hand loop", lambda: hand_b4(sizes)),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == total, "B4: wrong number of elements")
    require(sorted(results[HAND].result) == sorted(results[CORE].result), "B4: hand loop != core")
    return make_row(f"B4 mix of 3 shuffled ranges, {total:,} elements", results)


# ---------------------------------------------------------------------------
# Part 2: ReadOptions.


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


def cheap_pipeline(config: Config) -> dict[str, float]:
    """(a) `range(n).map(x + 1).batch(32).to_iter_dataset(options)`: default vs num_threads=0."""
    n = config.cheap_n
    print(
        f"ReadOptions (a): range({n:_}).map(x + 1).batch({BATCH}).to_iter_dataset(options)",
        flush=True,
    )
    ours = grainfn.MapDataset.range(n).map(add_one).batch(BATCH)
    theirs = grain.MapDataset.range(n).map(add_one).batch(BATCH)
    small = grain.MapDataset.range(config.core.warmup_n).map(add_one).batch(BATCH)
    cases = [
        Case("(a) grainfn default", lambda: list(ours.to_iter_dataset())),
        Case(
            "(a) grainfn threads=0",
            lambda: list(ours.to_iter_dataset(grainfn.ReadOptions(num_threads=0))),
        ),
    ]
    for sync in (False, True):
        options = grain.ReadOptions(num_threads=0) if sync else grain.ReadOptions()
        cases.append(
            Case(
                f"(a) Grain {'threads=0' if sync else 'default'}",
                read_all(theirs.to_iter_dataset(options)),
                warmup=read_all(small.to_iter_dataset(options)),
                budget=config.grain_budget,
            )
        )
    timings = run_cases(config.core, *cases)
    ours_default, ours_sync, grain_default, grain_sync = (t.result for t in timings)
    require(same_outputs(ours_default, ours_sync), "(a): grainfn default != threads=0")
    require(same_outputs(ours_default, grain_default), "(a): grainfn != Grain default")
    require(same_outputs(ours_default, grain_sync), "(a): grainfn != Grain threads=0")
    return {t.label.removeprefix("(a) "): t.best for t in timings}


def io_bound(config: Config) -> tuple[dict[str, float], dict[str, bool], int]:
    """(b) A source sleeping 1 ms per record, read with 16 threads and with none."""
    n = config.io_records
    print(
        f"ReadOptions (b): source of {n:_} records sleeping {IO_SLEEP * 1e3:g} ms each, "
        f"to_iter_dataset(ReadOptions(num_threads={IO_THREADS}, "
        f"prefetch_buffer_size={IO_BUFFER})) vs num_threads=0",
        flush=True,
    )
    threaded = grainfn.ReadOptions(num_threads=IO_THREADS, prefetch_buffer_size=IO_BUFFER)
    sync = grainfn.ReadOptions(num_threads=0)
    grain_threaded = grain.ReadOptions(num_threads=IO_THREADS, prefetch_buffer_size=IO_BUFFER)
    grain_sync = grain.ReadOptions(num_threads=0)

    def ours(size: int, options: grainfn.ReadOptions) -> Any:
        return grainfn.MapDataset.source(SleepySource(size)).to_iter_dataset(options)

    def theirs(size: int, options: grain.ReadOptions) -> Any:
        return grain.MapDataset.source(SleepySource(size)).to_iter_dataset(options)

    cases = []
    for label, make, options in (
        (f"grainfn threads={IO_THREADS}", ours, threaded),
        ("grainfn threads=0", ours, sync),
        (f"Grain threads={IO_THREADS}", theirs, grain_threaded),
        ("Grain threads=0", theirs, grain_sync),
    ):
        ds, small = make(n, options), make(config.io_warmup, options)
        cases.append(
            Case(
                f"(b) {label}",
                read_all(ds),
                warmup=read_all(small),
                budget=config.io_budget,
            )
        )
    timings = run_cases(config.core, *cases)
    ours_threaded, ours_sync, grain_threaded_out, grain_sync_out = (t.result for t in timings)
    expected = list(range(n))

    # A state taken under threads, while they read ahead, restored without threads.
    k = n * 3 // 4
    it = iter(ours(n, threaded))
    first = [next(it) for _ in range(k)]
    state = it.get_state()
    it.close()
    fresh = iter(ours(n, sync))
    fresh.set_state(state)
    rest = list(fresh)
    checks = {
        "same elements with and without threads": ours_threaded == ours_sync == expected,
        "= Grain (both)": grain_threaded_out == expected and grain_sync_out == expected,
        "state restores": first == expected[:k] and rest == expected[k:],
    }
    return {t.label.removeprefix("(b) "): t.best for t in timings}, checks, k


# ---------------------------------------------------------------------------
# Report.


def by_library(times: dict[str, float], settings: dict[str, str], subject: str) -> list[Row]:
    """A row per library; column `header` holds `times[f"{library} {settings[header]}"]`.

    The ratios are about the column `subject`.
    """
    return [
        Row(
            name,
            {h: times[f"{name} {setting}"] for h, setting in settings.items()},
            subject=subject,
        )
        for name in ("grainfn", "Grain")
    ]


def targets(
    rows: dict[str, Row], cheap: dict[str, float], io: dict[str, float], io_checks: dict[str, bool]
) -> Targets:
    out = Targets()
    for key, row in rows.items():
        out.at_most(f"{key}: facade within 1.2x of core", row.over(CORE), 1.2)
    out.at_least("B1: facade >= 10x Grain default", rows["B1"].speedup(GRAIN), 10)
    out.at_most("B1: facade within 3x of the hand loop's time", rows["B1"].over(HAND), 3)
    for key in ("B2", "B3", "B4"):
        out.at_least(f"{key}: facade >= 3x Grain default", rows[key].speedup(GRAIN), 3)
        out.at_least(f"{key}: facade >= 3x Grain threads=0", rows[key].speedup(GRAIN_SYNC), 3)
    for key, row in rows.items():
        out.add(f"{key}: facade output = core = Grain (both)", row.check, row.passed)
    out.at_most(
        "ReadOptions (a): grainfn default / threads=0 <= 1.1",
        ratio(cheap["grainfn default"], cheap["grainfn threads=0"]),
        1.1,
    )
    threads = f"threads={IO_THREADS}"
    out.at_least(
        f"ReadOptions (b): grainfn {threads} >= 8x threads=0",
        ratio(io["grainfn threads=0"], io[f"grainfn {threads}"]),
        8,
    )
    out.at_least(
        f"ReadOptions (b): grainfn {threads} not slower than Grain {threads}",
        ratio(io[f"Grain {threads}"], io[f"grainfn {threads}"]),
        1,
    )
    for name, ok in io_checks.items():
        out.check(f"ReadOptions (b): {name}", ok)
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.facade", __doc__, "grainfn facade benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    rows = {
        "B1": run.section("b1", lambda: b1(config)),
        "B2": run.section("b2", lambda: b2(config)),
        "B3": run.section("b3", lambda: b3(config)),
        "B4": run.section("b4", lambda: b4(config)),
    }
    cheap = run.section("ReadOptions (a)", lambda: cheap_pipeline(config))
    io, io_checks, k = run.section("ReadOptions (b)", lambda: io_bound(config))
    run.stop_clock()

    report = run.report
    report.add("### B1 to B4 through the facade")
    report.add()
    report.add(results_table(list(rows.values()), COLUMNS, RATIOS, check="facade output"))
    report.add()
    report.add(
        "- The facade reads by iterating the facade dataset (`list(ds)`: `to_iter_dataset()` "
        "with the default ReadOptions, then the `DatasetIterator`); the core reads as the core "
        "benchmarks do (`fn.elements` for B1, B2, B4, `fn.iterate` for B3). 'facade / core' "
        "and 'facade / hand loop' are time ratios (lower is better for the facade); speed-ups "
        "are Grain's time divided by the facade's. 'facade output' compares the facade's "
        "outputs element by element with the others'."
    )
    report.add(
        f"- Best of the timed runs; grainfn and the hand loop run at least "
        f"{config.core.repeats} times and {config.core.min_time:g} s, Grain until "
        f"{config.grain_budget:g} s (at least once, so Grain default gets one run)."
    )
    report.add()

    report.add("### ReadOptions")
    report.add()
    report.add(
        f"(a) Cheap pipeline: `range({config.cheap_n:_}).map(x + 1).batch({BATCH})` read "
        "through `to_iter_dataset(options)`."
    )
    report.add()
    settings = {"default ReadOptions": "default", "num_threads=0": "threads=0"}
    report.add(
        results_table(
            by_library(cheap, settings, subject="default ReadOptions"),
            list(settings),
            [("default / threads=0", Row.over, "num_threads=0")],
            first="Library",
        )
    )
    report.add()
    threads = f"threads={IO_THREADS}"
    report.add(
        f"(b) I/O-bound source: {config.io_records:,} records, `__getitem__` sleeps "
        f"{IO_SLEEP * 1e3:g} ms; `ReadOptions(num_threads={IO_THREADS}, "
        f"prefetch_buffer_size={IO_BUFFER})` against `num_threads=0`."
    )
    report.add()
    settings = {"num_threads=0": "threads=0", f"num_{threads}": threads}
    report.add(
        results_table(
            by_library(io, settings, subject=f"num_{threads}"),
            list(settings),
            [(f"speed-up of {threads}", Row.speedup, "num_threads=0")],
            first="Library",
        )
    )
    report.add()
    report.add(
        f"grainfn with {IO_THREADS} threads against Grain with {IO_THREADS} threads: "
        f"{fmt_ratio(ratio(io[f'Grain {threads}'], io[f'grainfn {threads}']))} "
        "(Grain's time / grainfn's). Elements of grainfn with and without threads: "
        f"{'identical' if io_checks['same elements with and without threads'] else 'DIFFERENT'}"
        f"; a `get_state()` taken after {k:,} elements under threads, restored in a fresh "
        f"iterator with num_threads=0: "
        f"{'exactly the remaining elements' if io_checks['state restores'] else 'WRONG'}."
    )
    report.add()
    run.finish(targets(rows, cheap, io, io_checks))


if __name__ == "__main__":
    main()
