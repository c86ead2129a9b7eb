"""Worker-process benchmarks: grainfn's `mp_prefetch` against Grain's, in the same run.

Run from the project root:

    python -m benchmarks.parallel [--quick] [--markdown PATH]

Both libraries run the same code through the same API (`import grainfn as grain`
against `import grain`):

- P1, CPU-bound map: `MapDataset.range(n).map(spin).to_iter_dataset(ReadOptions(
  num_threads=0))`, where `spin` is a pure-Python loop calibrated at start-up to
  about 2 ms per element, read to the end without `mp_prefetch` (0 workers) and
  through `.mp_prefetch(MultiprocessingOptions(num_workers=W))` for W = 1, 2.
  Times run from `iter(ds)` to the last element ("end to end", worker start-up
  included) and from the first element to the last ("steady state"); closing
  the iterator afterwards is not timed. The outputs are compared element by
  element: grainfn with 2 workers against grainfn with 0 and against Grain.
  The machine's ceiling is measured alongside: the same calls shared by 1 and
  by 2 plain processes, already started and without any library (on a shared
  virtual machine two "cores" do not always give twice the work of one).
- P2, time to the first element with 2 workers: from `iter(ds)` to the first
  `next` returning, on P1's pipeline, median of a few trials; and the same in a
  fresh interpreter ("new process"), where nothing is warm yet (grainfn starts
  its fork server there).
- P3, image-like batches: elements are uint8 arrays of shape (64, 64, 64, 3)
  (768 KiB) made in the worker by `np.full(shape, index % 256)`, through
  `mp_prefetch` with 2 workers and `per_worker_buffer_size=2`; the rate is the
  bytes of the arrays the parent receives per second of wall time, after the
  first element (start-up excluded) and from `iter(ds)` (included). A separate,
  untimed read checks every array (every byte equals its index mod 256) and
  that it is writable.
- P4, checkpoints: a `get_state()` taken midway through a grainfn pipeline
  (shuffle, random_map, filter, iter-level batch) read with 2 workers, restored
  with 0 workers, with 1 worker and without `mp_prefetch`, must give exactly the
  remaining elements.

Grain is imported only inside the functions that use it: the spawned workers of
both libraries re-import this module, and grainfn's workers should not pay for
importing Grain (about 1 s), nor Grain's for more than they need.
Every case is warmed up on a small version of its pipeline, and the runs of a
benchmark's cases are interleaved one by one (see `benchmarks.common`); each run
starts its own worker processes, as a new `iter(ds)` does.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import grainfn
from benchmarks.common import (
    Case,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    measure_all,
    ratio,
    require,
    same_outputs,
    yes_no,
)
from benchmarks.report import Row, Run, Targets, markdown_table

WORK_SECONDS = 0.002  # the target cost of one element of P1's map
IMAGE_SHAPE = (64, 64, 64, 3)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
WORKER_COUNTS = (0, 1, 2)
LIBRARIES = ("grainfn", "Grain")


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    cpu_n: int  # P1: elements of the CPU-bound map
    cpu_repeats: int  # P1: timed runs per case
    warmup_n: int  # elements of the small pipelines every case is warmed up on
    first_trials: int  # P2: trials per library
    image_n: int  # P3: image-like batches per read
    image_repeats: int  # P3: timed reads per library
    state_n: int  # P4: size of the range the checkpointed pipeline starts from


DEFAULT = Config(
    cpu_n=400,
    cpu_repeats=5,
    warmup_n=8,
    first_trials=7,
    image_n=300,
    image_repeats=5,
    state_n=2_000,
)
QUICK = Config(
    cpu_n=120,
    cpu_repeats=1,
    warmup_n=4,
    first_trials=3,
    image_n=100,
    image_repeats=2,
    state_n=500,
)


# ---------------------------------------------------------------------------
# The work, the libraries and reading.


@dataclasses.dataclass(frozen=True)
class Spin:
    """CPU-bound work: `iterations` steps of a pure-Python loop; the result depends on `x`."""

    iterations: int

    def __call__(self, x: int) -> int:
        acc = x
        for i in range(self.iterations):
            acc = (acc * 31 + i) % 1_000_003
        return acc


def seconds_per_call(work: Spin, calls: int) -> float:
    """The median seconds of `calls` calls of `work`."""
    times = []
    for x in range(calls):
        started = time.perf_counter()
        work(x)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def calibrate(target: float = WORK_SECONDS) -> tuple[Spin, float]:
    """A `Spin` taking about `target` seconds per call here, and its measured median."""
    iterations = 1_000
    while seconds_per_call(Spin(iterations), 5) < target / 4:
        iterations *= 2
    for _ in range(2):  # two corrections: the first estimate includes a cold start
        iterations = max(1, round(iterations * target / seconds_per_call(Spin(iterations), 15)))
    work = Spin(iterations)
    return work, seconds_per_call(work, 50)


def make_image(index: int) -> np.ndarray:
    """An image-like batch, every byte `index % 256`: cheap to make, 768 KiB to move."""
    return np.full(IMAGE_SHAPE, index % 256, dtype=np.uint8)


def jitter(x: int, rng: np.random.Generator) -> int:
    return 10 * x + int(rng.integers(0, 10))


def keep(x: int) -> bool:
    return x % 7 != 3


def grain_module() -> Any:
    """Google Grain, imported on first use, with absl flags marked parsed for its mp_prefetch."""
    import grain
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return grain


def library(name: str) -> Any:
    """The module giving the Grain API: grainfn's facade or Grain itself."""
    return grainfn if name == "grainfn" else grain_module()


def pipeline(lib: Any, n: int, transform: Callable[[int], Any], workers: int, buffer: int) -> Any:
    """`range(n).map(transform)` as an IterDataset, through `mp_prefetch` if `workers` > 0."""
    ds = lib.MapDataset.range(n).map(transform)
    ds = ds.to_iter_dataset(lib.ReadOptions(num_threads=0))
    if workers:
        options = lib.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=buffer)
        ds = ds.mp_prefetch(options)
    return ds


def close(iterator: Any) -> None:
    """Stops an iterator's workers now rather than when it is garbage collected."""
    closer = getattr(iterator, "close", None)
    if closer is not None:
        closer()


@dataclasses.dataclass
class Read:
    """When one read of a dataset delivered its first and its last element."""

    first: float  # seconds from `iter(ds)` to the first element
    total: float  # seconds from `iter(ds)` to the end of the iteration
    count: int  # elements read
    nbytes: int = 0  # bytes of the arrays after the first element (P3)
    first_nbytes: int = 0  # bytes of the first element's array (P3)

    @property
    def steady(self) -> float:
        """Seconds from the first element to the end."""
        return self.total - self.first


def read_elements(ds: Any, reads: list[Read]) -> list[Any]:
    """Reads `ds` to the end, appends the timing to `reads`, and returns the elements."""
    started = time.perf_counter()
    it = iter(ds)
    try:
        out = [next(it)]
        first = time.perf_counter() - started
        out.extend(it)
        total = time.perf_counter() - started
    finally:
        close(it)
    reads.append(Read(first, total, len(out)))
    return out


def read_images(ds: Any, reads: list[Read]) -> int:
    """Reads `ds` of `make_image` batches to the end, keeping none; returns the elements read.

    Each array's first byte is checked against its index on the way (one byte,
    so the check costs nothing); `check_images` checks them all.
    """
    started = time.perf_counter()
    it = iter(ds)
    try:
        image = next(it)
        first = time.perf_counter() - started
        first_nbytes = image.nbytes
        wrong = int(image.flat[0]) != 0
        nbytes, count = 0, 1
        for image in it:
            wrong |= int(image.flat[0]) != count % 256
            nbytes += image.nbytes
            count += 1
        total = time.perf_counter() - started
    finally:
        close(it)
    require(not wrong, "P3: an image with the wrong index")
    reads.append(Read(first, total, count, nbytes, first_nbytes))
    return count


def check_images(ds: Any, n: int) -> dict[str, bool]:
    """Reads `ds` untimed: every array of the right shape and bytes, and writable."""
    correct, writable, count = True, True, 0
    it = iter(ds)
    try:
        for index, image in enumerate(it):
            count += 1
            value = index % 256
            correct &= (
                isinstance(image, np.ndarray)
                and image.shape == IMAGE_SHAPE
                and image.dtype == np.uint8
                and bool((image == value).all())
            )
            try:
                image[-1, -1, -1, -1] = 255 - value
                writable &= int(image[-1, -1, -1, -1]) == 255 - value
            except ValueError:  # a read-only array
                writable = False
    finally:
        close(it)
    return {"correct": correct and count == n, "writable": writable}


def plural(count: int, one: str, many: str | None = None) -> str:
    """'1 worker', '2 workers'."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def best(values: list[float]) -> float:
    return min(values)


# ---------------------------------------------------------------------------
# P1: a CPU-bound map with 0, 1 and 2 workers.


def spin_range(work: Spin, first: int, stop: int, ready: Any, go: Any, results: Any) -> None:
    """Runs `work` over `[first, stop)` in a plain process once `go` is set; puts the seconds."""
    ready.put(os.getpid())
    go.wait()
    started = time.perf_counter()
    for x in range(first, stop):
        work(x)
    results.put(time.perf_counter() - started)


def plain_processes(work: Spin, n: int, processes: int) -> float:
    """Seconds for `processes` started, waiting processes to share `n` calls of `work`.

    No library and no start-up: the most that this many processes can do on
    this machine, which is what the speed-ups of the libraries compare with.
    """
    context = multiprocessing.get_context("spawn")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    bounds = [n * i // processes for i in range(processes + 1)]
    children = [
        context.Process(
            target=spin_range, args=(work, first, stop, ready, go, results), daemon=True
        )
        for first, stop in itertools.pairwise(bounds)
    ]
    for child in children:
        child.start()
    for _ in children:
        ready.get()
    go.set()
    seconds = max(results.get() for _ in children)
    for child in children:
        child.join()
    return seconds


def parallel_ceiling(config: Config, work: Spin) -> dict[int, float]:
    """Best seconds of 1 and of 2 plain processes sharing P1's `cpu_n` calls of `work`."""
    n = config.cpu_n
    print(f"P1 ceiling: {n} calls of spin shared by 1, then 2 plain processes", flush=True)
    times: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(max(2, config.cpu_repeats)):
        for processes, runs in times.items():
            runs.append(plain_processes(work, n, processes))
    for processes, runs in times.items():
        label = plural(processes, "plain process", "plain processes")
        print(f"  {label}: best {fmt_seconds(min(runs))}", flush=True)
    return {processes: min(runs) for processes, runs in times.items()}


@dataclasses.dataclass
class CpuResult:
    """P1's timings per (library, workers), and the output checks."""

    reads: dict[tuple[str, int], list[Read]]
    checks: dict[str, bool]
    plain: dict[int, float]  # best seconds of 1 and 2 plain processes doing the same work

    @property
    def ceiling(self) -> float | None:
        """How much faster 2 plain processes are than 1 on this machine."""
        return ratio(self.plain[1], self.plain[2])

    def end_to_end(self, name: str, workers: int) -> float:
        return best([r.total for r in self.reads[name, workers]])

    def steady(self, name: str, workers: int) -> float:
        return best([r.steady for r in self.reads[name, workers]])

    def speedup(self, name: str, workers: int, steady: bool = False) -> float | None:
        """The time with 0 workers divided by the time with `workers`."""
        time_of = self.steady if steady else self.end_to_end
        return ratio(time_of(name, 0), time_of(name, workers))


def cpu_bound(config: Config, work: Spin) -> CpuResult:
    n = config.cpu_n
    print(
        f"P1: MapDataset.range({n}).map(spin).to_iter_dataset(ReadOptions(num_threads=0))"
        f"[.mp_prefetch(MultiprocessingOptions(num_workers=W))], W = 0, 1, 2",
        flush=True,
    )
    cases: list[Case] = []
    reads: dict[tuple[str, int], list[Read]] = {}
    for name in LIBRARIES:
        lib = library(name)
        for workers in WORKER_COUNTS:
            ds = pipeline(lib, n, work, workers, 1)
            small = pipeline(lib, config.warmup_n, work, workers, 1)
            runs: list[Read] = []
            reads[name, workers] = runs
            cases.append(
                Case(
                    f"P1 {name} {plural(workers, 'worker')}",
                    functools.partial(read_elements, ds, runs),
                    warmup=functools.partial(read_elements, small, []),
                )
            )
    timings = measure_all(cases, repeats=config.cpu_repeats, budget=60.0, burst=0.0, verbose=False)
    outputs = {key: t.result for key, t in zip(reads, timings)}
    for (name, workers), runs in reads.items():
        end_to_end = fmt_seconds(best([r.total for r in runs]))
        print(
            f"  P1 {name} {plural(workers, 'worker')}: end to end best {end_to_end}, "
            f"steady state best {fmt_seconds(best([r.steady for r in runs]))}, "
            f"first element {fmt_seconds(statistics.median([r.first for r in runs]))} (median) "
            f"of {len(runs)} run(s)",
            flush=True,
        )
    ours = outputs["grainfn", 2]
    require(len(ours) == n, "P1: grainfn lost elements")
    checks = {
        "grainfn 2 workers = grainfn 0 workers": ours == outputs["grainfn", 0],
        "grainfn 2 workers = Grain 2 workers": ours == outputs["Grain", 2],
        "all six outputs equal": all(out == ours for out in outputs.values()),
        "= the map applied in this process": ours == [work(x) for x in range(n)],
    }
    return CpuResult(reads, checks, parallel_ceiling(config, work))


# ---------------------------------------------------------------------------
# P2: time to the first element with 2 workers.


def first_element(config: Config, work: Spin) -> dict[str, list[float]]:
    n = config.cpu_n
    print(
        f"P2: time from iter(ds) to the first element, P1's pipeline with 2 workers, "
        f"{config.first_trials} trials",
        flush=True,
    )
    datasets = {name: pipeline(library(name), n, work, 2, 1) for name in LIBRARIES}
    times: dict[str, list[float]] = {
        **{name: [] for name in LIBRARIES},
        **{f"{name}, new process": [] for name in LIBRARIES},
    }
    for _ in range(config.first_trials):
        for name, ds in datasets.items():  # the libraries take turns
            started = time.perf_counter()
            it = iter(ds)
            next(it)
            times[name].append(time.perf_counter() - started)
            close(it)
    for _ in range(max(1, config.first_trials // 2)):
        for name in LIBRARIES:
            times[f"{name}, new process"].append(cold_first_element(name))
    for name, values in times.items():
        print(
            f"  P2 {name}: median {fmt_seconds(statistics.median(values))}, "
            f"min {fmt_seconds(min(values))}, max {fmt_seconds(max(values))}",
            flush=True,
        )
    return times


COLD_START = """
import sys, time
if __name__ == "__main__":
    name = sys.argv[1]
    if name == "grainfn":
        import grainfn as grain
    else:
        import grain
        from absl import flags
        flags.FLAGS.mark_as_parsed()
    ds = grain.MapDataset.range(400).map(abs).to_iter_dataset(grain.ReadOptions(num_threads=0))
    ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    started = time.perf_counter()
    it = iter(ds)
    next(it)
    print(time.perf_counter() - started)
    it.close() if hasattr(it, "close") else None
"""


def cold_first_element(name: str) -> float:
    """Seconds from `iter(ds)` to the first element in a fresh interpreter.

    Nothing is warm there: grainfn starts its fork server, Grain its spawned
    workers. The interpreter's own start and imports are not counted.
    """
    done = subprocess.run(
        [sys.executable, "-c", COLD_START, name],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return float(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# P3: image-like batches.


@dataclasses.dataclass
class ImageResult:
    """P3's reads per library and the untimed checks of the arrays."""

    reads: dict[str, list[Read]]
    checks: dict[str, dict[str, bool]]

    def steady_rates(self, name: str) -> list[float]:
        """Bytes per second after the first element, one per read."""
        return [r.nbytes / r.steady for r in self.reads[name]]

    def total_rates(self, name: str) -> list[float]:
        """Bytes per second from `iter(ds)`, start-up included, one per read."""
        return [(r.nbytes + r.first_nbytes) / r.total for r in self.reads[name]]


def images(config: Config) -> ImageResult:
    n = config.image_n
    print(
        f"P3: MapDataset.range({n}).map(np.full({IMAGE_SHAPE}, i % 256, uint8))"
        ".to_iter_dataset(ReadOptions(num_threads=0)).mp_prefetch(MultiprocessingOptions("
        "num_workers=2, per_worker_buffer_size=2))",
        flush=True,
    )
    cases: list[Case] = []
    reads: dict[str, list[Read]] = {}
    checks: dict[str, dict[str, bool]] = {}
    for name in LIBRARIES:
        lib = library(name)
        ds = pipeline(lib, n, make_image, 2, 2)
        small = pipeline(lib, config.warmup_n, make_image, 2, 2)
        runs: list[Read] = []
        reads[name] = runs
        cases.append(
            Case(
                f"P3 {name}",
                functools.partial(read_images, ds, runs),
                warmup=functools.partial(read_images, small, []),
            )
        )
    measure_all(cases, repeats=config.image_repeats, budget=60.0, burst=0.0, verbose=False)
    for name in LIBRARIES:
        require(all(r.count == n for r in reads[name]), f"P3: {name} lost elements")
        checks[name] = check_images(pipeline(library(name), n, make_image, 2, 2), n)
    result = ImageResult(reads, checks)
    for name in LIBRARIES:
        steady, total = result.steady_rates(name), result.total_rates(name)
        print(
            f"  P3 {name}: after the first element best {fmt_rate(max(steady), 'B/s')}, "
            f"median {fmt_rate(statistics.median(steady), 'B/s')}; from iter(ds) best "
            f"{fmt_rate(max(total), 'B/s')}; first element "
            f"{fmt_seconds(statistics.median([r.first for r in reads[name]]))} (median); "
            f"arrays {checks[name]}",
            flush=True,
        )
    return result


# ---------------------------------------------------------------------------
# P4: a state taken with 2 workers, restored with 0 and 1.


def state_pipeline(n: int, workers: int | None) -> grainfn.IterDataset[Any]:
    """Shuffle, random_map, filter, iter-level batch; `mp_prefetch(workers)` unless None."""
    ds = (
        grainfn.MapDataset.range(n)
        .seed(5)
        .shuffle()
        .random_map(jitter)
        .filter(keep)
        .to_iter_dataset(grainfn.ReadOptions(num_threads=0))
        .batch(4)
    )
    if workers is None:
        return ds
    return ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=workers))


def checkpoints(config: Config) -> tuple[dict[str, bool], int, int]:
    n = config.state_n
    print(
        f"P4: MapDataset.range({n}).seed(5).shuffle().random_map(..).filter(..)"
        ".to_iter_dataset().batch(4).mp_prefetch(2 workers): get_state() midway, restored "
        "with 0 and 1 workers",
        flush=True,
    )
    expected = list(state_pipeline(n, None))
    k = len(expected) // 2
    it = iter(state_pipeline(n, 2))
    try:
        head = [next(it) for _ in range(k)]
        state = it.get_state()
        after = next(it)  # the workers went on reading; the state must not have
    finally:
        close(it)
    checks = {
        "first half with 2 workers": same_outputs(head, expected[:k])
        and same_outputs([after], expected[k : k + 1])
    }
    for label, workers in (("0 workers", 0), ("1 worker", 1), ("no mp_prefetch", None)):
        fresh = iter(state_pipeline(n, workers))
        try:
            fresh.set_state(state)
            rest = list(fresh)
        finally:
            close(fresh)
        checks[f"restored with {label}"] = same_outputs(rest, expected[k:])
    for name, ok in checks.items():
        print(f"  P4 {name}: {'yes' if ok else 'NO'}", flush=True)
    return checks, k, len(expected)


# ---------------------------------------------------------------------------
# Report.


def fmt_bytes_rate(per_second: float | None) -> str:
    return fmt_rate(per_second, "B/s")


def targets(
    cpu: CpuResult,
    first: dict[str, list[float]],
    image: ImageResult,
    state_checks: dict[str, bool],
) -> Targets:
    out = Targets()
    for steady, how in ((False, "end to end"), (True, "steady state")):
        out.at_least(
            f"P1: grainfn 2 workers >= 1.7x faster than 0 workers ({how})",
            cpu.speedup("grainfn", 2, steady),
            1.7,
        )
    for name, ok in cpu.checks.items():
        out.check(f"P1: output {name}", ok)
    for key in ("grainfn", "grainfn, new process"):
        out.at_most(
            f"P2: {key}: first element with 2 workers <= 0.5 s (median)",
            statistics.median(first[key]),
            0.5,
            fmt_seconds,
        )
    out.at_least(
        "P3: grainfn >= 1 GB/s of arrays after the first element (best read)",
        max(image.steady_rates("grainfn")),
        1e9,
        fmt_bytes_rate,
    )
    out.at_least(
        "P3: the same, median read",
        statistics.median(image.steady_rates("grainfn")),
        1e9,
        fmt_bytes_rate,
    )
    for key, ok in image.checks["grainfn"].items():
        out.check(f"P3: grainfn arrays {key}", ok)
    for name, ok in state_checks.items():
        out.check(f"P4: state taken with 2 workers, {name}", ok)
    return out


def cpu_table(cpu: CpuResult) -> str:
    rows = []
    for name in LIBRARIES:
        for workers in WORKER_COUNTS:
            runs = cpu.reads[name, workers]
            rows.append(
                [
                    f"{name}, {plural(workers, 'worker')}",
                    fmt_seconds(cpu.end_to_end(name, workers)),
                    fmt_seconds(cpu.steady(name, workers)),
                    fmt_seconds(statistics.median([r.first for r in runs])),
                    fmt_ratio(cpu.speedup(name, workers)),
                    fmt_ratio(cpu.speedup(name, workers, steady=True)),
                ]
            )
    return markdown_table(
        [
            "Library, workers",
            "end to end",
            "steady state",
            "first element",
            "speed-up end to end",
            "speed-up steady state",
        ],
        rows,
    )


def image_table(image: ImageResult) -> str:
    rows = []
    for name in LIBRARIES:
        steady, total = image.steady_rates(name), image.total_rates(name)
        rows.append(
            [
                name,
                fmt_rate(max(steady), "B/s"),
                fmt_rate(statistics.median(steady), "B/s"),
                fmt_rate(max(total), "B/s"),
                fmt_seconds(statistics.median([r.first for r in image.reads[name]])),
                yes_no(image.checks[name]["correct"]),
                yes_no(image.checks[name]["writable"]),
            ]
        )
    return markdown_table(
        [
            "Library",
            "after 1st element, best",
            "after 1st, median",
            "from iter(ds), best",
            "first element",
            "arrays correct",
            "writable",
        ],
        rows,
    )


def result_rows(
    config: Config, cpu: CpuResult, first: dict[str, list[float]], image: ImageResult
) -> list[Row]:
    """P1's, P2's and P3's figures of grainfn and Grain side by side, as `Row`s.

    For the JSON summary only (`benchmarks.suite`'s combined table): the
    printed tables show the same figures. P1 per element (shown as the time
    of all `cpu_n`), P2 the median seconds, P3 microseconds per array received
    after the first element, from each library's best read (its best rate).
    """
    n = config.cpu_n
    rows = [
        Row(
            f"P1 CPU-bound map, 2 workers, {how}",
            {name: time_of(name, 2) / n for name in LIBRARIES},
            items=n,
        )
        for how, time_of in (("end to end", cpu.end_to_end), ("steady state", cpu.steady))
    ]
    rows += [
        Row(
            f"P2 first element, 2 workers{where} (median)",
            {name: statistics.median(first[f"{name}{where}"]) for name in LIBRARIES},
        )
        for where in ("", ", new process")
    ]
    rows.append(
        Row(
            f"P3 image-like arrays ({IMAGE_BYTES / 2**10:.0f} KiB), 2 workers, "
            "per array after the first (best read)",
            {name: IMAGE_BYTES / max(image.steady_rates(name)) for name in LIBRARIES},
            unit="us",
        )
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.parallel", __doc__, "grainfn worker-process benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    work, work_seconds = calibrate()
    print(
        f"Calibrated the CPU-bound map: {work.iterations:,} loop steps, "
        f"{fmt_seconds(work_seconds)} per element (median of 50 calls)",
        flush=True,
    )
    cpu = run.section("P1", lambda: cpu_bound(config, work))
    first = run.section("P2", lambda: first_element(config, work))
    image = run.section("P3", lambda: images(config))
    state_checks, k, batches = run.section("P4", lambda: checkpoints(config))
    run.stop_clock()

    report = run.report
    report.add("### P1: CPU-bound map, 0, 1 and 2 workers")
    report.add()
    report.add(
        f"`MapDataset.range({config.cpu_n}).map(spin).to_iter_dataset(ReadOptions("
        f"num_threads=0))`, then `.mp_prefetch(MultiprocessingOptions(num_workers=W))` for "
        f"W >= 1; `spin` is a pure-Python loop of {work.iterations:,} steps, "
        f"{fmt_seconds(work_seconds)} per element here."
    )
    report.add()
    report.add(cpu_table(cpu))
    report.add()
    report.add(
        "- 'end to end': from `iter(ds)` to the last element, worker start-up included; "
        "'steady state': from the first element to the last. Best of "
        f"{config.cpu_repeats} run(s) each; 'first element' is the median. Speed-ups are "
        "the same library's time with 0 workers divided by its time with W."
    )
    report.add(
        f"- The machine's ceiling: the same {config.cpu_n} calls shared by 2 plain processes, "
        f"already started and without any library, take {fmt_seconds(cpu.plain[2])} against "
        f"{fmt_seconds(cpu.plain[1])} in 1, a speed-up of {fmt_ratio(cpu.ceiling)}. grainfn's "
        "steady-state speed-up with 2 workers is "
        f"{fmt_ratio(ratio(cpu.speedup('grainfn', 2, steady=True), cpu.ceiling))} of that."
    )
    report.add(
        "- Outputs: " + "; ".join(f"{name}: {yes_no(ok)}" for name, ok in cpu.checks.items()) + "."
    )
    report.add()

    report.add("### P2: time to the first element, 2 workers")
    report.add()
    report.add(
        markdown_table(
            ["Library", "median", "min", "max", "trials"],
            [
                [
                    name,
                    fmt_seconds(statistics.median(values)),
                    fmt_seconds(min(values)),
                    fmt_seconds(max(values)),
                    len(values),
                ]
                for name, values in first.items()
            ],
        )
    )
    report.add()

    report.add("### P3: image-like batches through 2 workers")
    report.add()
    report.add(
        f"{config.image_n} uint8 arrays of shape {IMAGE_SHAPE} ({IMAGE_BYTES / 2**10:.0f} KiB "
        f"each, {config.image_n * IMAGE_BYTES / 1e6:.0f} MB in all) made by `np.full` in the "
        "workers, `MultiprocessingOptions(num_workers=2, per_worker_buffer_size=2)`; "
        f"bytes received by the parent per second, {config.image_repeats} read(s) per library."
    )
    report.add()
    report.add(image_table(image))
    report.add()

    report.add("### P4: checkpoints across worker counts")
    report.add()
    report.add(
        f"grainfn pipeline of {batches} batches read with 2 workers; `get_state()` after {k}; "
        "restored in a fresh iterator: "
        + "; ".join(f"{name}: {yes_no(ok)}" for name, ok in state_checks.items())
        + "."
    )
    report.add()
    report.add_rows(result_rows(config, cpu, first, image))
    run.finish(targets(cpu, first, image, state_checks))


if __name__ == "__main__":
    main()
