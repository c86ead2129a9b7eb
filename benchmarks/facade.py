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
import os
import time
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import map_level
from benchmarks.common import (
    Case,
    CpuMonitor,
    Report,
    Timing,
    argument_parser,
    fmt_ratio,
    fmt_seconds,
    markdown_table,
    measure_all,
    ratio,
)
from benchmarks.map_level import B4_WEIGHTS, BATCH, add_random, clear_shuffle_tables, same_outputs
from grainfn import fn

FACADE, CORE, GRAIN, GRAIN_SYNC, HAND = "facade", "core", "grain", "grain_threads0", "hand"
COLUMNS = {
    FACADE: "grainfn facade",
    CORE: "grainfn core",
    GRAIN: "Grain default",
    GRAIN_SYNC: "Grain threads=0",
    HAND: "hand loop",
}
IO_THREADS = 16
IO_BUFFER = 500
IO_SLEEP = 0.001  # seconds per record of the I/O-bound source


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters; `quick` shrinks everything for a smoke run.

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

    @property
    def quick(self) -> bool:
        return self.core.quick


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


def run_cases(config: Config, *cases: Case) -> list[Timing]:
    """Times the implementations of one benchmark together, their runs interleaved."""
    core = config.core
    return measure_all(
        cases, repeats=core.repeats, min_time=core.min_time, budget=core.budget, burst=core.burst
    )


def grain_case(config: Config, label: str, build: Callable[[int], Any], n: int, sync: bool) -> Case:
    """Grain's epoch of `build(n)` as in `benchmarks.map_level`, within `grain_budget`."""
    case = map_level.grain_case(config.core, label, build, n, sync)
    return dataclasses.replace(case, budget=config.grain_budget)


@dataclasses.dataclass
class Row:
    """One benchmark of part 1: best seconds per implementation and the output checks."""

    key: str
    name: str
    seconds: dict[str, float | None]
    same: dict[str, bool]  # "core", "Grain default", "Grain threads=0" -> facade output equal

    def over(self, key: str) -> float | None:
        """The facade's time divided by implementation `key`'s."""
        return ratio(self.seconds[FACADE], self.seconds.get(key))

    def speedup(self, key: str) -> float | None:
        """Implementation `key`'s time divided by the facade's."""
        return ratio(self.seconds.get(key), self.seconds[FACADE])

    def check_text(self) -> str:
        return ", ".join(f"{'=' if ok else '!='} {name}" for name, ok in self.same.items())


def make_row(key: str, name: str, timings: dict[str, Timing]) -> Row:
    facade = timings[FACADE].result
    return Row(
        key,
        name,
        {k: t.best for k, t in timings.items()},
        {
            "core": same_outputs(facade, timings[CORE].result),
            "Grain default": same_outputs(facade, timings[GRAIN].result),
            "Grain threads=0": same_outputs(facade, timings[GRAIN_SYNC].result),
        },
    )


def read_all(ds: Any) -> Callable[[], list[Any]]:
    """A function that reads one epoch of the facade or Grain dataset `ds` into a list."""
    return lambda: list(ds)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


# ---------------------------------------------------------------------------
# Part 1: B1 to B4 through the facade.


def b1(config: Config) -> Row:
    n = config.core.b1_n
    print(f"B1: MapDataset.range({n:_}).seed(0).shuffle().map(x + 1).batch({BATCH})", flush=True)
    facade = grainfn.MapDataset.range(n).seed(0).shuffle().map(add_one).batch(BATCH)
    core = fn.batch(BATCH, fn.map(add_one, fn.shuffle(fn.seed(0, fn.range(n)))))

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).shuffle().map(add_one).batch(BATCH)

    def hand() -> list[np.ndarray]:
        order = np.random.default_rng(0).permutation(n).tolist()
        return [np.array([x + 1 for x in order[i : i + BATCH]]) for i in range(0, n, BATCH)]

    timings = run_cases(
        config,
        Case("B1 facade list(ds)", lambda: list(facade)),
        Case("B1 core fn.elements", lambda: list(fn.elements(core))),
        grain_case(config, "B1", build_grain, n, sync=False),
        grain_case(config, "B1", build_grain, n, sync=True),
        Case("B1 hand loop", hand),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == math.ceil(n / BATCH), "B1: wrong number of batches")
    values = np.sort(np.concatenate(results[HAND].result))
    require(np.array_equal(values, np.arange(1, n + 1)), "B1: hand loop lost elements")
    return make_row("B1", f"B1 shuffle+map+batch({BATCH}), {n:,} elements", results)


def b2(config: Config) -> Row:
    n = config.core.b2_n
    print(f"B2: MapDataset.range({n:_}).seed(0).random_map(x + rng.integers(0, 100))", flush=True)
    facade = grainfn.MapDataset.range(n).seed(0).random_map(add_random)
    core = fn.random_map(add_random, fn.seed(0, fn.range(n)))
    stage_seed = core.seed  # the seed fn.seed(0) derives for this stage

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).random_map(add_random)

    def hand() -> list[Any]:
        # map_level's B2 hand loop: one Philox bit generator rewound to counter
        # [0, 0, 0, i] before element i (the same stream as Grain and grainfn).
        key = np.random.SeedSequence(stage_seed).generate_state(2, dtype=np.uint64)
        bits = np.random.Philox(key=key)
        rng = np.random.Generator(bits)
        state = bits.state
        counter = state["state"]
        out = []
        for i in range(n):
            counter["counter"] = np.array([0, 0, 0, i], dtype=np.uint64)
            state["buffer_pos"] = 4
            state["has_uint32"] = 0
            bits.state = state
            out.append(i + rng.integers(0, 100))
        return out

    timings = run_cases(
        config,
        Case("B2 facade list(ds)", lambda: list(facade)),
        Case("B2 core fn.elements", lambda: list(fn.elements(core))),
        grain_case(config, "B2", build_grain, n, sync=False),
        grain_case(config, "B2", build_grain, n, sync=True),
        Case("B2 hand loop", hand),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == n, "B2: wrong number of elements")
    require(results[HAND].result == results[CORE].result, "B2: hand loop != core")
    return make_row("B2", f"B2 random_map, {n:,} elements", results)


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

    def hand() -> list[np.ndarray]:
        kept = [x for x in np.random.default_rng(2).permutation(n).tolist() if x % 3 == 0]
        return [np.array(kept[i : i + BATCH]) for i in range(0, len(kept), BATCH)]

    timings = run_cases(
        config,
        Case("B3 facade list(ds)", lambda: list(facade)),
        Case("B3 core fn.iterate", lambda: list(fn.iterate(core))),
        grain_b3(sync=False),
        grain_b3(sync=True),
        Case("B3 hand loop", hand),
    )
    results = dict(zip(COLUMNS, timings))
    kept = len(range(0, n, 3))
    require(len(results[FACADE].result) == math.ceil(kept / BATCH), "B3: wrong number of batches")
    values = np.sort(np.concatenate(results[HAND].result))
    require(np.array_equal(values, np.arange(0, n, 3)), "B3: hand loop lost elements")
    return make_row("B3", f"B3 shuffle+filter, stream batch({BATCH}), {n:,} elements", results)


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

    # map_level's B4 hand loop: a fixed period of 10 positions (5, 3 and 2 per component).
    period = np.repeat(np.arange(3), [round(w * 10) for w in B4_WEIGHTS])

    def hand() -> list[int]:
        rng = np.random.default_rng(0)
        which = np.tile(period, total // period.size)
        out = np.empty(total, dtype=np.int64)
        for c, size in enumerate(sizes):
            out[which == c] = rng.permutation(size)
        return out.tolist()

    timings = run_cases(
        config,
        Case("B4 facade list(ds)", lambda: list(facade), setup=clear_shuffle_tables),
        Case("B4 core fn.elements", lambda: list(fn.elements(core)), setup=clear_shuffle_tables),
        grain_case(config, "B4", build_grain, total, sync=False),
        grain_case(config, "B4", build_grain, total, sync=True),
        Case("B4 hand loop", hand),
    )
    results = dict(zip(COLUMNS, timings))
    require(len(results[FACADE].result) == total, "B4: wrong number of elements")
    require(sorted(results[HAND].result) == sorted(results[CORE].result), "B4: hand loop != core")
    return make_row("B4", f"B4 mix of 3 shuffled ranges, {total:,} elements", results)


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
    timings = run_cases(config, *cases)
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
    timings = run_cases(config, *cases)
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


def results_table(rows: list[Row]) -> str:
    headers = [
        "Benchmark",
        *COLUMNS.values(),
        "facade / core",
        "speed-up vs Grain default",
        "vs Grain threads=0",
        "facade / hand loop",
        "facade output",
    ]
    body = [
        [
            row.name,
            *(fmt_seconds(row.seconds.get(key)) for key in COLUMNS),
            fmt_ratio(row.over(CORE)),
            fmt_ratio(row.speedup(GRAIN)),
            fmt_ratio(row.speedup(GRAIN_SYNC)),
            fmt_ratio(row.over(HAND)),
            row.check_text(),
        ]
        for row in rows
    ]
    return markdown_table(headers, body)


def status(ok: bool) -> str:
    return "met" if ok else "NOT met"


def targets(
    rows: list[Row], cheap: dict[str, float], io: dict[str, float], io_checks: dict[str, bool]
) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for every target of this benchmark."""
    out: list[tuple[str, str, bool]] = []

    def at_most(name: str, value: float | None, limit: float) -> None:
        out.append((name, fmt_ratio(value), value is not None and value <= limit))

    def at_least(name: str, value: float | None, limit: float) -> None:
        out.append((name, fmt_ratio(value), value is not None and value >= limit))

    by_key = {row.key: row for row in rows}
    for row in rows:
        at_most(f"{row.key}: facade within 1.2x of core", row.over(CORE), 1.2)
    at_least("B1: facade >= 10x Grain default", by_key["B1"].speedup(GRAIN), 10)
    at_most("B1: facade within 3x of the hand loop's time", by_key["B1"].over(HAND), 3)
    for key in ("B2", "B3", "B4"):
        at_least(f"{key}: facade >= 3x Grain default", by_key[key].speedup(GRAIN), 3)
        at_least(f"{key}: facade >= 3x Grain threads=0", by_key[key].speedup(GRAIN_SYNC), 3)
    for row in rows:
        same = all(row.same.values())
        out.append((f"{row.key}: facade output = core = Grain (both)", row.check_text(), same))
    at_most(
        "ReadOptions (a): grainfn default / threads=0 <= 1.1",
        ratio(cheap["grainfn default"], cheap["grainfn threads=0"]),
        1.1,
    )
    threads = f"threads={IO_THREADS}"
    at_least(
        f"ReadOptions (b): grainfn {threads} >= 8x threads=0",
        ratio(io["grainfn threads=0"], io[f"grainfn {threads}"]),
        8,
    )
    at_least(
        f"ReadOptions (b): grainfn {threads} not slower than Grain {threads}",
        ratio(io[f"Grain {threads}"], io[f"grainfn {threads}"]),
        1,
    )
    for name, ok in io_checks.items():
        out.append((f"ReadOptions (b): {name}", "yes" if ok else "no", ok))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser("benchmarks.facade", __doc__.splitlines()[0])
    args = parser.parse_args(argv)
    config = QUICK if args.quick else DEFAULT
    report = Report(f"grainfn facade benchmarks{' (--quick)' if config.quick else ''}")

    monitor = CpuMonitor().start()
    started = time.perf_counter()
    rows = []
    for bench in (b1, b2, b3, b4):
        bench_started = time.perf_counter()
        rows.append(bench(config))
        print(f"  ({bench.__name__} took {time.perf_counter() - bench_started:.0f} s)", flush=True)
    cheap = cheap_pipeline(config)
    io, io_checks, k = io_bound(config)
    elapsed = time.perf_counter() - started

    print()
    report.add("### B1 to B4 through the facade")
    report.add()
    report.add(results_table(rows))
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
    report.add(
        markdown_table(
            ["Library", "default ReadOptions", "num_threads=0", "default / threads=0"],
            [
                [
                    name,
                    fmt_seconds(cheap[f"{name} default"]),
                    fmt_seconds(cheap[f"{name} threads=0"]),
                    fmt_ratio(ratio(cheap[f"{name} default"], cheap[f"{name} threads=0"])),
                ]
                for name in ("grainfn", "Grain")
            ],
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
    report.add(
        markdown_table(
            ["Library", "num_threads=0", f"num_{threads}", f"speed-up of {threads}"],
            [
                [
                    name,
                    fmt_seconds(io[f"{name} threads=0"]),
                    fmt_seconds(io[f"{name} {threads}"]),
                    fmt_ratio(ratio(io[f"{name} threads=0"], io[f"{name} {threads}"])),
                ]
                for name in ("grainfn", "Grain")
            ],
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

    report.add(
        markdown_table(
            ["Target", "Measured", "Status"],
            [
                [name, measured, status(ok)]
                for name, measured, ok in targets(rows, cheap, io, io_checks)
            ],
        )
    )
    report.add()
    report.add(f"Total wall time of the run: {elapsed:.0f} s.")
    other = monitor.other_cpu_seconds()
    if other is not None:
        report.add(
            f"Other processes used {other[0]:.0f} CPU-seconds meanwhile "
            f"({other[0] / other[1]:.2f} of the {os.cpu_count()} cores on average)."
        )
    if args.markdown:
        report.write(args.markdown)
        print(f"(written to {args.markdown})")


if __name__ == "__main__":
    main()
