"""DataLoader benchmarks: grainfn's `DataLoader` against Grain's, with 0 and 2 workers.

Run from the project root:

    python -m benchmarks.dataloader [--quick] [--markdown PATH]

Both libraries build the same loader through the same API (`import grainfn as
grain` against `import grain`): `DataLoader(data_source=..., sampler=
samplers.IndexSampler(N, shard_options=sharding.NoSharding(), shuffle=True,
num_epochs=1, seed=S), operations=[...], worker_count=W)` with the default
ReadOptions and worker_buffer_size unless stated, read to the end with `list`
(or an equivalent loop). The transformations are subclasses of each library's
`transforms.Map`, `RandomMap` and `Filter` with the same code, plus its
`transforms.Batch`.

- D1, a cheap pipeline, worker_count=0: the source is a Python list of the
  ints `0 .. N-1` (N = 100,000); operations `Map(x * 2 + 1)`,
  `RandomMap(x + rng.integers(1000))`, `Filter(x % 3 != 0)`, `Batch(32)`,
  seed 42. Times one epoch from `iter(loader)` to the last batch, for grainfn,
  Grain with its default ReadOptions (16 threads), Grain with
  `ReadOptions(num_threads=0)`, and a hand-written loop doing the same work:
  the order from grainfn's sampler (`sampler.record_keys` over all indices, one
  vectorized call, timed), then per record the two maps, the filter and a
  batch `np.array` of every 32 kept values. The hand loop's generator for
  record `g` is Grain's, `Philox(key=S + g)`, made by rewinding the state of
  one Philox bit generator to key `S + g`, counter 0 (the cheapest way found
  to get that stream; building `np.random.Generator(np.random.Philox(key=
  S + g))` per record gives the same draws and costs about 10 µs more).
  Reported as records read per second (N / time) and as time ratios.
  grainfn's batches are checked equal, batch by batch, to both Grain's and
  the hand loop's.
- D2, a CPU-bound map, worker_count 0 and 2: the source is `list(range(n))`
  (n = 1,000); operations `Map(spin)`, `Batch(8)`, where `spin` is
  `benchmarks.parallel`'s pure-Python loop calibrated at start-up to about
  1 ms per record. Both libraries with 0 and 2 workers (worker_buffer_size
  1). Times from `iter(loader)` to the last batch ("end to end", worker
  start-up included) and from the first batch to the last ("steady state");
  closing the iterator afterwards is not timed. Checks: grainfn with 2 workers
  = grainfn with 0 = Grain with 0, batch by batch. Grain with 2 workers
  batches each worker's records separately, so its batches differ; its
  records are compared as a multiset (all batches concatenated and sorted).
- D3, image-like records, worker_count 0 and 2: a source whose record `k` is
  made in `__getitem__` as a uint8 array of shape (32, 32, 3) (3 KiB) filled
  with `k % 256`, its first three bytes set to `k` (big-endian) so every
  record is identifiable; n = 20,000 records, operations `[Batch(64)]`. Both
  libraries with 0 and 2 workers; the reads keep only each batch's record
  keys (read off the first three bytes). Reported: batches per second and MB
  (10**6 bytes) of batch arrays per second, both end to end (from
  `iter(loader)`, worker start-up included), and the time to the first batch.
  Checks: the record keys of grainfn with 2 workers = grainfn with 0 = Grain
  with 0, batch by batch; Grain with 2 workers as a multiset (its batches
  differ, as in D2); and one untimed read of grainfn with 2 workers checks
  every byte of every array, its shape and dtype.
- State: D1's pipeline on a smaller source, read with grainfn and 2 workers;
  `get_state()` after half the batches, restored in a fresh iterator of the
  same loader built with worker_count=0, must give exactly the remaining
  batches of a 0-worker read (and the reverse: taken with 0, restored with 2).

Grain is imported only inside the functions that use it (through
`benchmarks.parallel.grain_module`, which also marks absl's flags parsed, as
Grain's worker processes need): spawned workers of both libraries re-import
this module, and grainfn's should not pay for importing Grain. The
transformation classes are made per library by a function, and reach the
workers of both libraries by value through cloudpickle.

Times are wall-clock, best of R runs after an untimed warm-up (the worker
cases and Grain warm up on a small version of their loader); the runs of a
benchmark's cases are interleaved (see `benchmarks.common`), and each run
starts its own worker processes, as a new `iter(loader)` does.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import grainfn
from benchmarks.common import (
    Case,
    Timing,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    measure_all,
    ratio,
    require,
    same_outputs,
    yes_no,
)
from benchmarks.parallel import Read, Spin, calibrate, close, grain_module, plural, read_elements
from benchmarks.report import GRAIN as GRAIN_COLUMN
from benchmarks.report import GRAIN_SYNC as GRAIN_SYNC_COLUMN
from benchmarks.report import GRAINFN, Row, Run, Targets, markdown_table

SEED = 42
D1_BATCH = 32
D2_BATCH = 8
D2_WORK_SECONDS = 0.001  # the target cost of one record of D2's map
D3_BATCH = 64
IMAGE_SHAPE = (32, 32, 3)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
WORKER_COUNTS = (0, 2)
LIBRARIES = ("grainfn", "Grain")

GRAINFN_LOADER, GRAIN_DEFAULT, GRAIN_SYNC, HAND = (
    "grainfn DataLoader",
    "Grain DataLoader, default ReadOptions",
    "Grain DataLoader, ReadOptions(num_threads=0)",
    "hand loop",
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    d1_n: int  # D1: records of the source
    d1_repeats: int  # D1: timed runs of grainfn and the hand loop
    d1_min_time: float  # D1: ... and at least this many seconds of them
    grain_budget: float  # D1: seconds of timed runs per Grain case before repeats stop
    warmup_n: int  # D1: records of the small loaders Grain warms up on
    d2_n: int  # D2: records of the CPU-bound map
    d2_repeats: int  # D2: timed runs per case
    d3_n: int  # D3: image-like records
    d3_repeats: int  # D3: timed runs per case
    state_n: int  # State: records of D1's pipeline


DEFAULT = Config(
    d1_n=100_000,
    d1_repeats=5,
    d1_min_time=3.0,
    grain_budget=20.0,
    warmup_n=2_000,
    d2_n=1000,
    d2_repeats=5,
    d3_n=20_000,
    d3_repeats=5,
    state_n=20_000,
)
QUICK = Config(
    d1_n=10_000,
    d1_repeats=2,
    d1_min_time=0.0,
    grain_budget=2.0,
    warmup_n=500,
    d2_n=120,
    d2_repeats=1,
    d3_n=4_000,
    d3_repeats=1,
    state_n=3_000,
)


# ---------------------------------------------------------------------------
# The libraries, the transformations, the sources.


def library(name: str) -> Any:
    """The module giving the Grain API: grainfn or Grain itself."""
    return grainfn if name == "grainfn" else grain_module()


def d1_operations(lib: Any) -> list[Any]:
    """D1's operations with `lib`'s classes: map, random map, filter, batch."""

    class TwiceAndOne(lib.transforms.Map):
        def map(self, x: Any) -> Any:
            return x * 2 + 1

    class AddNoise(lib.transforms.RandomMap):
        def random_map(self, x: Any, rng: np.random.Generator) -> Any:
            return x + rng.integers(1000)

    class NotMultipleOf3(lib.transforms.Filter):
        def filter(self, x: Any) -> bool:
            return x % 3 != 0

    return [TwiceAndOne(), AddNoise(), NotMultipleOf3(), lib.transforms.Batch(D1_BATCH)]


def spin_operations(lib: Any, work: Spin) -> list[Any]:
    """D2's operations with `lib`'s classes: `Map(work)`, `Batch(8)`."""

    class SpinMap(lib.transforms.Map):
        def __init__(self, work: Spin) -> None:
            self.work = work

        def map(self, x: Any) -> Any:
            return self.work(x)

    return [SpinMap(work), lib.transforms.Batch(D2_BATCH)]


@dataclasses.dataclass(frozen=True)
class ImageSource:
    """Record `k`: a uint8 (32, 32, 3) array of `k % 256`, its first three bytes `k`."""

    length: int

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: int) -> np.ndarray:
        key = int(key)
        image = np.full(IMAGE_SHAPE, key % 256, dtype=np.uint8)
        image[0, 0] = ((key >> 16) & 255, (key >> 8) & 255, key & 255)
        return image


def image_keys(batch: np.ndarray) -> np.ndarray:
    """The record keys of a batch of `ImageSource` records (from their first three bytes)."""
    head = batch[:, 0, 0].astype(np.int64)
    return (head[:, 0] << 16) | (head[:, 1] << 8) | head[:, 2]


def sampler(lib: Any, n: int) -> Any:
    """The IndexSampler every benchmark reads with: one shuffled epoch of `n` records."""
    return lib.samplers.IndexSampler(
        n, shard_options=lib.sharding.NoSharding(), shuffle=True, num_epochs=1, seed=SEED
    )


def make_loader(
    lib: Any,
    source: Any,
    operations: list[Any],
    workers: int = 0,
    read_options: Any = None,
) -> Any:
    """`lib.DataLoader` over `source` with `sampler(lib, len(source))`."""
    return lib.DataLoader(
        data_source=source,
        sampler=sampler(lib, len(source)),
        operations=operations,
        worker_count=workers,
        read_options=read_options,
    )


def read_all(loader: Any) -> list[Any]:
    """One epoch of `loader`, its iterator closed afterwards (not that it is timed then)."""
    it = iter(loader)
    try:
        return list(it)
    finally:
        close(it)


def multiset(batches: list[Any]) -> np.ndarray:
    """The records of `batches`, sorted: what two orders of the same records share."""
    if not batches:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate([np.asarray(b).reshape(-1) for b in batches]))


# ---------------------------------------------------------------------------
# D1: a cheap pipeline, worker_count=0.


def hand_d1(source: list[int], keys_of: Callable[[np.ndarray], list[int]]) -> list[np.ndarray]:
    """D1 by hand: the sampler's order, then per record map, random map, filter, batch.

    The generator of record `g` is `Philox(key=SEED + g)`, as Grain's sampler
    makes it, got by rewinding one bit generator's state (see the docstring).
    """
    n = len(source)
    keys = keys_of(np.arange(n, dtype=np.int64))
    bits = np.random.Philox(key=0)
    rng = np.random.Generator(bits)
    state = bits.state
    inner = state["state"]
    zero = np.zeros(4, dtype=np.uint64)
    out: list[np.ndarray] = []
    batch: list[Any] = []
    for g, key in enumerate(keys):
        x = source[key] * 2 + 1
        inner["key"] = np.array([SEED + g, 0], dtype=np.uint64)
        inner["counter"] = zero
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        bits.state = state
        x = x + rng.integers(1000)
        if x % 3 != 0:
            batch.append(x)
            if len(batch) == D1_BATCH:
                out.append(np.array(batch))
                batch = []
    if batch:
        out.append(np.array(batch))
    return out


@dataclasses.dataclass
class CheapResult:
    """D1's best times per implementation and the output checks."""

    times: dict[str, float]
    runs: dict[str, int]
    batches: int
    checks: dict[str, bool]

    def over_grainfn(self, key: str) -> float | None:
        """Implementation `key`'s time divided by grainfn's (above 1: grainfn is faster)."""
        return ratio(self.times[key], self.times[GRAINFN_LOADER])


def cheap(config: Config) -> CheapResult:
    n = config.d1_n
    print(
        f"D1: DataLoader(list(range({n:_})), IndexSampler(shuffle, 1 epoch, seed {SEED}), "
        f"[Map(x * 2 + 1), RandomMap(x + rng.integers(1000)), Filter(x % 3 != 0), "
        f"Batch({D1_BATCH})], worker_count=0)",
        flush=True,
    )
    source = list(range(n))
    small = list(range(config.warmup_n))
    ours = make_loader(grainfn, source, d1_operations(grainfn))
    grain = grain_module()
    keys_of = sampler(grainfn, n).record_keys
    cases = [
        Case("D1 grainfn", lambda: list(ours)),
        *(
            Case(
                f"D1 Grain {'threads=0' if sync else 'default'}",
                functools.partial(list, make_loader(grain, source, d1_operations(grain), 0, opts)),
                warmup=functools.partial(
                    list, make_loader(grain, small, d1_operations(grain), 0, opts)
                ),
                budget=config.grain_budget,
            )
            for sync, opts in ((False, None), (True, grain.ReadOptions(num_threads=0)))
        ),
        Case("D1 hand loop", lambda: hand_d1(source, keys_of)),
    ]
    timings = measure_all(cases, repeats=config.d1_repeats, min_time=config.d1_min_time)
    results = dict(zip((GRAINFN_LOADER, GRAIN_DEFAULT, GRAIN_SYNC, HAND), timings))
    batches = results[GRAINFN_LOADER].result
    require(bool(batches), "D1: grainfn read no batches")
    checks = {
        f"= {key}": same_outputs(batches, results[key].result)
        for key in (GRAIN_DEFAULT, GRAIN_SYNC, HAND)
    }
    return CheapResult(
        {key: t.best for key, t in results.items()},
        {key: len(t.runs) for key, t in results.items()},
        len(batches),
        checks,
    )


# ---------------------------------------------------------------------------
# D2 and D3: 0 and 2 workers, both libraries.


@dataclasses.dataclass
class WorkerResult:
    """The reads of D2 or D3 per (library, workers), and their output checks."""

    reads: dict[tuple[str, int], list[Read]]
    checks: dict[str, bool]

    def end_to_end(self, name: str, workers: int) -> float:
        return min(r.total for r in self.reads[name, workers])

    def steady(self, name: str, workers: int) -> float:
        return min(r.steady for r in self.reads[name, workers])

    def first(self, name: str, workers: int) -> float:
        """The median time to the first batch."""
        return float(np.median([r.first for r in self.reads[name, workers]]))

    def speedup(self, name: str, workers: int, steady: bool = False) -> float | None:
        """The library's time with 0 workers divided by its time with `workers`."""
        time_of = self.steady if steady else self.end_to_end
        return ratio(time_of(name, 0), time_of(name, workers))

    def over_grain(self, workers: int) -> float | None:
        """Grain's time divided by grainfn's with `workers`, end to end (above 1: grainfn wins)."""
        return ratio(self.end_to_end("Grain", workers), self.end_to_end("grainfn", workers))


def time_workers(
    label: str,
    build: Callable[[Any, int, int], Any],
    read: Callable[[Any, list[Read]], Any],
    n: int,
    warmup_n: int,
    repeats: int,
) -> tuple[dict[tuple[str, int], list[Read]], dict[tuple[str, int], Any]]:
    """Times `read(build(lib, n, workers))` for both libraries and worker counts, interleaved.

    Returns every run's `Read` and the output of each case's last run.
    """
    cases: list[Case] = []
    reads: dict[tuple[str, int], list[Read]] = {}
    for name in LIBRARIES:
        lib = library(name)
        for workers in WORKER_COUNTS:
            runs: list[Read] = []
            reads[name, workers] = runs
            cases.append(
                Case(
                    f"{label} {name} {plural(workers, 'worker')}",
                    functools.partial(read, build(lib, n, workers), runs),
                    warmup=functools.partial(read, build(lib, warmup_n, workers), []),
                )
            )
    timings: list[Timing] = measure_all(
        cases, repeats=repeats, budget=60.0, burst=0.0, verbose=False
    )
    return reads, {key: t.result for key, t in zip(reads, timings)}


def print_reads(label: str, result: WorkerResult) -> None:
    for (name, workers), runs in result.reads.items():
        print(
            f"  {label} {name} {plural(workers, 'worker')}: end to end best "
            f"{fmt_seconds(result.end_to_end(name, workers))}, steady state best "
            f"{fmt_seconds(result.steady(name, workers))}, first batch "
            f"{fmt_seconds(result.first(name, workers))} (median) of {len(runs)} run(s)",
            flush=True,
        )


def worker_checks(outputs: dict[tuple[str, int], Any]) -> dict[str, bool]:
    """grainfn 2 = grainfn 0 = Grain 0 exactly; Grain 2 as a multiset and exactly."""
    ours = outputs["grainfn", 0]
    checks = {
        "grainfn 2 workers = grainfn 0 workers": same_outputs(outputs["grainfn", 2], ours),
        "grainfn 0 workers = Grain 0 workers": same_outputs(outputs["Grain", 0], ours),
        "Grain 2 workers: same records (as a multiset)": np.array_equal(
            multiset(outputs["Grain", 2]), multiset(ours)
        ),
    }
    checks["Grain 2 workers: same batches, in order"] = same_outputs(outputs["Grain", 2], ours)
    return checks


def cpu_bound(config: Config, work: Spin) -> WorkerResult:
    n = config.d2_n
    print(
        f"D2: DataLoader(list(range({n})), IndexSampler(shuffle, 1 epoch), "
        f"[Map(spin), Batch({D2_BATCH})], worker_count=W), W = 0, 2",
        flush=True,
    )

    def build(lib: Any, size: int, workers: int) -> Any:
        return make_loader(lib, list(range(size)), spin_operations(lib, work), workers)

    reads, outputs = time_workers(
        "D2", build, read_elements, n, max(2 * D2_BATCH, 16), config.d2_repeats
    )
    require(len(multiset(outputs["grainfn", 2])) == n, "D2: grainfn lost records")
    result = WorkerResult(reads, worker_checks(outputs))
    print_reads("D2", result)
    return result


def read_images(loader: Any, reads: list[Read]) -> list[np.ndarray]:
    """Reads `loader` of `ImageSource` batches to the end, keeping each batch's record keys."""
    started = time.perf_counter()
    it = iter(loader)
    try:
        batch = next(it)
        first = time.perf_counter() - started
        keys, nbytes = [image_keys(batch)], batch.nbytes
        for batch in it:
            keys.append(image_keys(batch))
            nbytes += batch.nbytes
        total = time.perf_counter() - started
    finally:
        close(it)
    reads.append(Read(first, total, len(keys), nbytes))
    return keys


def check_images(loader: Any, n: int) -> bool:
    """Reads `loader` untimed: every batch's shape and dtype, and every byte of every record."""
    correct, keys = True, []
    it = iter(loader)
    try:
        for batch in it:
            correct &= (
                isinstance(batch, np.ndarray)
                and batch.dtype == np.uint8
                and batch.shape[1:] == IMAGE_SHAPE
                and 0 < len(batch) <= D3_BATCH
            )
            if not correct:
                break
            batch_keys = image_keys(batch)
            flat = batch.reshape(len(batch), -1)
            fill = (batch_keys % 256).astype(np.uint8)
            correct &= bool((flat[:, 3:] == fill[:, None]).all())
            keys.append(batch_keys)
    finally:
        close(it)
    return correct and np.array_equal(multiset(keys), np.arange(n))


def images(config: Config) -> tuple[WorkerResult, bool]:
    n = config.d3_n
    print(
        f"D3: DataLoader(ImageSource({n:_}): uint8 {IMAGE_SHAPE} per record, "
        f"IndexSampler(shuffle, 1 epoch), [Batch({D3_BATCH})], worker_count=W), W = 0, 2",
        flush=True,
    )

    def build(lib: Any, size: int, workers: int) -> Any:
        return make_loader(lib, ImageSource(size), [lib.transforms.Batch(D3_BATCH)], workers)

    reads, outputs = time_workers("D3", build, read_images, n, 4 * D3_BATCH, config.d3_repeats)
    result = WorkerResult(reads, worker_checks(outputs))
    require(
        np.array_equal(multiset(outputs["grainfn", 2]), np.arange(n)), "D3: grainfn lost records"
    )
    print_reads("D3", result)
    arrays_ok = check_images(build(grainfn, n, 2), n)
    print(f"  D3 grainfn 2 workers, every byte checked: {yes_no(arrays_ok)}", flush=True)
    return result, arrays_ok


# ---------------------------------------------------------------------------
# State: taken with 2 workers, restored with 0 (and the reverse).


def checkpoints(config: Config) -> tuple[dict[str, bool], int, int]:
    n = config.state_n
    print(
        f"State: D1's loader over list(range({n:_})); get_state() midway with 2 workers, "
        "restored with 0 (and the reverse)",
        flush=True,
    )
    source = list(range(n))

    def loader(workers: int) -> Any:
        return make_loader(grainfn, source, d1_operations(grainfn), workers)

    expected = read_all(loader(0))
    k = len(expected) // 2
    checks = {}
    for taken, restored in ((2, 0), (0, 2)):
        it = iter(loader(taken))
        try:
            head = [next(it) for _ in range(k)]
            state = it.get_state()
            after = next(it)  # the workers read on; the state must not have moved
        finally:
            close(it)
        fresh = iter(loader(restored))
        try:
            fresh.set_state(state)
            rest = list(fresh)
        finally:
            close(fresh)
        checks[f"taken with {plural(taken, 'worker')}, restored with {restored}"] = (
            same_outputs(head, expected[:k])
            and same_outputs([after], expected[k : k + 1])
            and same_outputs(rest, expected[k:])
        )
    for name, ok in checks.items():
        print(f"  State {name}: {'yes' if ok else 'NO'}", flush=True)
    return checks, k, len(expected)


# ---------------------------------------------------------------------------
# Report.


def cheap_table(d1: CheapResult, n: int) -> str:
    rows = []
    for key, seconds in d1.times.items():
        check = "" if key == GRAINFN_LOADER else yes_no(d1.checks[f"= {key}"])
        rows.append(
            [
                key,
                fmt_seconds(seconds),
                fmt_rate(n / seconds, " records/s"),
                fmt_ratio(d1.over_grainfn(key)),
                d1.runs[key],
                check or "(reference)",
            ]
        )
    return markdown_table(
        ["Implementation", "time", "records read / s", "time / grainfn's", "runs", "= grainfn"],
        rows,
    )


def worker_rows(result: WorkerResult, rates: Callable[[str, int], list[str]]) -> list[list[str]]:
    """The rows of D2 or D3 per (library, workers); `rates` gives the cells after the times."""
    rows = []
    for name in LIBRARIES:
        for workers in WORKER_COUNTS:
            rows.append(
                [
                    f"{name}, {plural(workers, 'worker')}",
                    fmt_seconds(result.end_to_end(name, workers)),
                    fmt_seconds(result.steady(name, workers)),
                    fmt_seconds(result.first(name, workers)),
                    *rates(name, workers),
                    fmt_ratio(result.speedup(name, workers)),
                    fmt_ratio(result.speedup(name, workers, steady=True)),
                    fmt_ratio(result.over_grain(workers)) if name == "grainfn" else "",
                ]
            )
    return rows


def cpu_table(d2: WorkerResult) -> str:
    rows = worker_rows(d2, lambda name, workers: [])
    return markdown_table(
        [
            "Library, workers",
            "end to end",
            "steady state",
            "first batch",
            "speed-up vs 0 workers (end to end)",
            "speed-up (steady state)",
            "Grain's time / grainfn's (end to end)",
        ],
        rows,
    )


def image_table(d3: WorkerResult, n: int) -> str:
    batches = -(-n // D3_BATCH)

    def rates(name: str, workers: int) -> list[str]:
        best = d3.end_to_end(name, workers)
        return [
            fmt_rate(batches / best, " batches/s"),
            f"{n * IMAGE_BYTES / best / 1e6:.1f} MB/s",
        ]

    rows = worker_rows(d3, rates)
    return markdown_table(
        [
            "Library, workers",
            "end to end",
            "steady state",
            "first batch",
            "batches/s (end to end)",
            "MB/s (end to end)",
            "speed-up vs 0 workers (end to end)",
            "speed-up (steady state)",
            "Grain's time / grainfn's (end to end)",
        ],
        rows,
    )


def result_rows(config: Config, d1: CheapResult, d2: WorkerResult, d3: WorkerResult) -> list[Row]:
    """D1's, D2's and D3's figures of grainfn and Grain side by side, as `Row`s.

    For the JSON summary only (`benchmarks.suite`'s combined table): the
    printed tables show the same best times, here per record (shown as the
    time of the epoch). D1 with Grain's default and threads=0 ReadOptions and
    the hand loop; D2 and D3 end to end, with 0 and with 2 workers.
    """
    columns = {
        GRAINFN_LOADER: GRAINFN,
        GRAIN_DEFAULT: GRAIN_COLUMN,
        GRAIN_SYNC: GRAIN_SYNC_COLUMN,
        HAND: HAND,
    }
    n = config.d1_n
    rows = [
        Row(
            "D1 cheap pipeline, 0 workers",
            {columns[key]: seconds / n for key, seconds in d1.times.items()},
            items=n,
        )
    ]
    for label, what, result, size in (
        ("D2", "CPU-bound map", d2, config.d2_n),
        ("D3", "image-like records", d3, config.d3_n),
    ):
        rows += [
            Row(
                f"{label} {what}, {plural(workers, 'worker')}, end to end",
                {name: result.end_to_end(name, workers) / size for name in LIBRARIES},
                items=size,
            )
            for workers in WORKER_COUNTS
        ]
    return rows


def targets(
    d1: CheapResult,
    d2: WorkerResult,
    d3: WorkerResult,
    arrays_ok: bool,
    state_checks: dict[str, bool],
) -> Targets:
    out = Targets()
    out.at_least(
        "D1: grainfn >= 2x Grain (default ReadOptions), worker_count=0",
        d1.over_grainfn(GRAIN_DEFAULT),
        2,
    )
    out.at_least(
        "D1: grainfn >= 2x Grain (ReadOptions(num_threads=0)), worker_count=0",
        d1.over_grainfn(GRAIN_SYNC),
        2,
    )
    for name, ok in d1.checks.items():
        out.check(f"D1: grainfn's batches {name}", ok)
    out.at_least(
        "D2: grainfn 2 workers >= 1.6x faster than 0 workers (end to end)",
        d2.speedup("grainfn", 2),
        1.6,
    )
    out.at_least(
        "D2: grainfn 2 workers not slower than Grain 2 workers (end to end)",
        d2.over_grain(2),
        1,
    )
    for label, result in (("D2", d2), ("D3", d3)):
        for name, ok in result.checks.items():
            if not name.endswith("in order"):  # Grain's own behaviour, not a target
                out.check(f"{label}: {name}", ok)
    out.check("D3: grainfn 2 workers, every byte of every record", arrays_ok)
    for name, ok in state_checks.items():
        out.check(f"State {name} workers: the remaining batches", ok)
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.dataloader", __doc__, "grainfn DataLoader benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    work, work_seconds = calibrate(D2_WORK_SECONDS)
    print(
        f"Calibrated D2's map: {work.iterations:,} loop steps, "
        f"{fmt_seconds(work_seconds)} per record (median of 50 calls)",
        flush=True,
    )
    d1 = run.section("D1", lambda: cheap(config))
    d2 = run.section("D2", lambda: cpu_bound(config, work))
    d3, arrays_ok = run.section("D3", lambda: images(config))
    state_checks, k, batches = run.section("State", lambda: checkpoints(config))
    run.stop_clock()

    report = run.report
    report.add("### D1: a cheap pipeline, worker_count=0")
    report.add()
    report.add(
        f"`DataLoader` over a list of {config.d1_n:,} ints, `IndexSampler(shuffle=True, "
        f"num_epochs=1, seed={SEED})`, operations `Map(x * 2 + 1)`, "
        f"`RandomMap(x + rng.integers(1000))`, `Filter(x % 3 != 0)`, `Batch({D1_BATCH})`: "
        f"{d1.batches:,} batches. One epoch from `iter(loader)`; best of the runs."
    )
    report.add()
    report.add(cheap_table(d1, config.d1_n))
    report.add()
    report.add(
        "- 'time / grainfn's' is the implementation's time divided by grainfn's: above 1x "
        f"grainfn is faster. grainfn takes {fmt_ratio(ratio(1, d1.over_grainfn(HAND)))} the "
        "hand loop's time. The hand loop takes the order from grainfn's sampler and draws "
        f"from `Philox(key={SEED} + g)` for record `g` by rewinding one bit generator; "
        "'= grainfn' compares the batches one by one."
    )
    report.add()

    report.add("### D2: CPU-bound map, 0 and 2 workers")
    report.add()
    report.add(
        f"`DataLoader` over `list(range({config.d2_n}))`, the same sampler, operations "
        f"`Map(spin)`, `Batch({D2_BATCH})`, `worker_count=W`; `spin` is a pure-Python loop of "
        f"{work.iterations:,} steps, {fmt_seconds(work_seconds)} per record here."
    )
    report.add()
    report.add(cpu_table(d2))
    report.add()
    report.add(
        "- 'end to end': from `iter(loader)` to the last batch, worker start-up included; "
        "'steady state': from the first batch to the last; best of "
        f"{config.d2_repeats} run(s) each, 'first batch' the median. Speed-ups: the same "
        "library's time with 0 workers divided by its time with W (end to end, then steady "
        "state); the last column is Grain's time divided by grainfn's at the same worker "
        "count, end to end."
    )
    report.add(
        "- Outputs: " + "; ".join(f"{name}: {yes_no(ok)}" for name, ok in d2.checks.items()) + "."
    )
    report.add()

    report.add("### D3: image-like records, 0 and 2 workers")
    report.add()
    report.add(
        f"`DataLoader` over {config.d3_n:,} records made in `__getitem__` as uint8 arrays of "
        f"shape {IMAGE_SHAPE} ({IMAGE_BYTES / 2**10:.0f} KiB), the same sampler, "
        f"`[Batch({D3_BATCH})]`: {-(-config.d3_n // D3_BATCH):,} batches, "
        f"{config.d3_n * IMAGE_BYTES / 1e6:.1f} MB; best of {config.d3_repeats} run(s) each."
    )
    report.add()
    report.add(image_table(d3, config.d3_n))
    report.add()
    report.add(
        "- Rates are end to end: batches (and MB of batch arrays, 10**6 bytes) per second "
        "from `iter(loader)` to the last batch, worker start-up included. Speed-ups and the "
        "last column as in D2."
    )
    report.add(
        "- Outputs (record keys per batch): "
        + "; ".join(f"{name}: {yes_no(ok)}" for name, ok in d3.checks.items())
        + f"; grainfn 2 workers, every byte checked: {yes_no(arrays_ok)}."
    )
    report.add()

    report.add("### State across worker counts")
    report.add()
    report.add(
        f"D1's grainfn loader over {config.state_n:,} ints ({batches:,} batches); `get_state()` "
        f"after {k:,} batches, restored in a fresh iterator of the same loader built with "
        "the other worker count."
    )
    report.add()
    report.add(
        markdown_table(
            ["State", "remaining batches identical"],
            [[name, yes_no(ok)] for name, ok in state_checks.items()],
        )
    )
    report.add()
    report.add_rows(result_rows(config, d1, d2, d3))
    run.finish(targets(d1, d2, d3, arrays_ok, state_checks))


if __name__ == "__main__":
    main()
