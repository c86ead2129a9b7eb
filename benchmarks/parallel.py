"""Worker-process benchmarks: grainfn's `mp_prefetch` against Grain's, the same code for both.

- P1: `MapDataset.range(n).map(spin).to_iter_dataset(ReadOptions(num_threads=0))`,
  `spin` a pure-Python loop of about 2 ms, without `mp_prefetch` and with 1 and 2
  workers: from `iter(ds)` to the last element ("end to end", start-up included)
  and from the first element on ("steady state"); beside it, the same calls in 1
  and 2 plain processes, already started: the machine's ceiling.
- P2: time to the first element with 2 workers, warm and in a new interpreter.
- P3: uint8 arrays of shape (64, 64, 64, 3) made by `np.full` in 2 workers
  (`per_worker_buffer_size=2`): time per array received; every byte is checked.
- P4: a `get_state()` taken with 2 workers, restored with 0, 1 and no `mp_prefetch`.
- P5: 64x64x3 uint8 images, each flipped (a strided copy, too cheap to pay for
  its transfer), without `mp_prefetch` and with 2 workers, which must earn their
  place: the work moves to the consumer, so 2 workers are no slower than none.
  Beside it, grainfn with its workers pinned (`adaptive=False`): what that saves.
- P6: the same for a CPU-bound map of about 0.3 ms per element: the workers
  earn their place, and keep it.

Grain is imported only where used: spawned workers re-import this module. Every
case is warmed up on a small pipeline; the cases' runs alternate one by one.
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
from typing import Any

import numpy as np

import grainfn
from benchmarks.harness import (
    GRAINFN,
    Row,
    Target,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    ratio,
    require,
    same_outputs,
)
from benchmarks.run import Step, run_suite
from benchmarks.workers import (
    LIBRARIES,
    Spin,
    calibrate,
    close,
    earn_their_place,
    libraries,
    library,
    map_pipeline,
    reading,
    resume,
    take_state,
    time_workers,
    timed_read,
    worker_rows,
)

IMAGE_SHAPE = (64, 64, 64, 3)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
P3 = f"P3 {IMAGE_BYTES // 2**10} KiB arrays, 2 workers"


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing (`QUICK` shrinks everything for a smoke run)."""

    cpu_n: int  # P1: elements of the CPU-bound map
    cpu_repeats: int  # P1: timed runs per case
    warmup_n: int  # elements of the small pipelines every case is warmed up on
    first_trials: int  # P2: trials per library
    image_n: int  # P3: arrays per read
    image_repeats: int  # P3: timed reads per library
    state_n: int  # P4: size of the range the checkpointed pipeline starts from
    flip_n: int  # P5: images per read
    heavy_n: int  # P6: elements of the CPU-bound map


DEFAULT = Config(
    cpu_n=400,
    cpu_repeats=5,
    warmup_n=8,
    first_trials=7,
    image_n=300,
    image_repeats=5,
    state_n=2_000,
    flip_n=40_000,
    heavy_n=2_000,
)
QUICK = Config(
    cpu_n=120,
    cpu_repeats=1,
    warmup_n=4,
    first_trials=3,
    image_n=100,
    image_repeats=2,
    state_n=500,
    flip_n=4_000,
    heavy_n=300,
)


# ---------------------------------------------------------------------------
# P1: a CPU-bound map with 0, 1 and 2 workers.


def spin_range(work: Spin, first: int, stop: int, ready: Any, go: Any, done: Any) -> None:
    """Runs `work` over `[first, stop)` in a plain process once `go` is set; puts the seconds."""
    ready.put(os.getpid())
    go.wait()
    started = time.perf_counter()
    for x in range(first, stop):
        work(x)
    done.put(time.perf_counter() - started)


def plain_processes(work: Spin, n: int, processes: int) -> float:
    """Seconds for `processes` started, waiting processes to share `n` calls of `work`: the
    most this many processes can do here, without any library and without start-up."""
    context = multiprocessing.get_context("spawn")
    ready, done, go = context.Queue(), context.Queue(), context.Event()
    bounds = [n * i // processes for i in range(processes + 1)]
    children = [
        context.Process(target=spin_range, args=(work, a, b, ready, go, done), daemon=True)
        for a, b in itertools.pairwise(bounds)
    ]
    for child in children:
        child.start()
    for _ in children:
        ready.get()
    go.set()
    seconds = max(done.get() for _ in children)
    for child in children:
        child.join()
    return seconds


def cpu_bound(c: Config, work: Spin) -> list[Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return map_pipeline(lib, size, work, workers, 1)

    reads, outputs = time_workers(
        libraries(), build, timed_read, c.cpu_n, c.warmup_n, c.cpu_repeats, (0, 1, 2)
    )
    ours = outputs["grainfn", 2]
    require(len(ours) == c.cpu_n, "P1: grainfn lost elements")
    checks = {
        "grainfn 2 workers = grainfn 0 workers": ours == outputs["grainfn", 0],
        "grainfn 2 workers = Grain 2 workers": ours == outputs["Grain", 2],
        "all six outputs equal": all(out == ours for out in outputs.values()),
        "= the map applied in this process": ours == [work(x) for x in range(c.cpu_n)],
    }
    plain = {p: [] for p in (1, 2)}  # the machine's ceiling, measured after the libraries
    for _ in range(max(2, c.cpu_repeats)):
        for processes, runs in plain.items():
            runs.append(plain_processes(work, c.cpu_n, processes))
    ceiling = ratio(min(plain[1]), min(plain[2]))
    rows = {row.key: row for row in worker_rows("P1", reads, c.cpu_n)}
    steady = ratio(
        rows["P1 0 workers, steady state"].per_item[GRAINFN],
        rows["P1 2 workers, steady state"].per_item[GRAINFN],
    )
    detail = (
        f"{c.cpu_n} elements, spin of {work.iterations:,} loop steps. The same calls take "
        f"{fmt_seconds(min(plain[2]))} in 2 plain processes already started, against "
        f"{fmt_seconds(min(plain[1]))} in 1: a ceiling of {fmt_ratio(ceiling)}; grainfn's "
        f"steady-state speed-up with 2 workers is {fmt_ratio(ratio(steady, ceiling))} of it."
    )
    key = "P1 2 workers, end to end"
    rows[key] = dataclasses.replace(rows[key], detail=detail, checks=checks)
    return list(rows.values())


# ---------------------------------------------------------------------------
# P2: time to the first element with 2 workers.


COLD_START = """
import sys, time
if __name__ == "__main__":
    if sys.argv[1] == "grainfn":
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
    """Seconds from `iter(ds)` to the first element in a fresh interpreter, where nothing is warm
    (grainfn starts its fork server, Grain its spawned workers); start-up and imports excluded."""
    command = [sys.executable, "-c", COLD_START, name]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    return float(done.stdout.strip().splitlines()[-1])


def first_element(c: Config, work: Spin) -> list[Row]:
    datasets = {name: map_pipeline(library(name), c.cpu_n, work, 2, 1) for name in LIBRARIES}
    warm: dict[str, list[float]] = {name: [] for name in LIBRARIES}
    for _ in range(c.first_trials):
        for name, ds in datasets.items():  # the libraries take turns
            started = time.perf_counter()
            it = iter(ds)
            next(it)
            warm[name].append(time.perf_counter() - started)
            close(it)
    cold: dict[str, list[float]] = {name: [] for name in LIBRARIES}
    for _ in range(max(1, c.first_trials // 2)):
        for name in LIBRARIES:
            cold[name].append(cold_first_element(name))
    rows = []
    for where, times in (("warm", warm), ("new process", cold)):
        spread = "; ".join(
            f"{k} {fmt_seconds(min(v))} to {fmt_seconds(max(v))}" for k, v in times.items()
        )
        detail = f"median of {len(times['grainfn'])} trials, 2 workers; min to max: {spread}"
        figures = {name: statistics.median(values) for name, values in times.items()}
        rows.append(Row(f"P2 first element, {where}", "", figures, detail=detail))
    return rows


# ---------------------------------------------------------------------------
# P3: image-like arrays.


def make_image(index: int) -> np.ndarray:
    """An image-like array, every byte `index % 256`: cheap to make, 768 KiB to move."""
    return np.full(IMAGE_SHAPE, index % 256, dtype=np.uint8)


def check_images(ds: Any, n: int) -> dict[str, bool]:
    """Reads `ds` untimed: every array of the right shape and bytes, and writable."""
    correct, writable, count = True, True, 0
    with reading(ds) as it:
        for index, image in enumerate(it):
            count, value = count + 1, index % 256
            correct &= (
                image.shape == IMAGE_SHAPE
                and image.dtype == np.uint8
                and bool((image == value).all())
            )
            try:
                image[-1, -1, -1, -1] = 255 - value
                writable &= int(image[-1, -1, -1, -1]) == 255 - value
            except ValueError:  # a read-only array
                writable = False
    return {"correct": correct and count == n, "writable": writable}


def images(c: Config) -> list[Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return map_pipeline(lib, size, make_image, workers, 2)

    def first_byte(image: np.ndarray) -> int:  # what is kept of an array: checked below
        return int(image.flat[0])

    n = c.image_n
    reads, outputs = time_workers(
        libraries(),
        build,
        functools.partial(timed_read, keep=first_byte),
        n,
        c.warmup_n,
        c.image_repeats,
        (2,),
    )
    figures = {}  # seconds per array after the first (best, median read), from iter(ds), first
    for name in LIBRARIES:
        require(outputs[name, 2] == [i % 256 for i in range(n)], f"P3: {name} lost arrays")
        runs = reads[name, 2]
        figures[name] = min(r.steady for r in runs) / (n - 1)
        figures[f"{name}, median read"] = statistics.median(r.steady for r in runs) / (n - 1)
        figures[f"{name} from iter(ds)"] = min(r.total for r in runs) / n
        figures[f"{name} first"] = statistics.median(r.first for r in runs)
    theirs = check_images(build(library("Grain"), n, 2), n)
    detail = (
        f"{n} arrays, {c.image_repeats} read(s) per library; seconds per array received (the "
        f"bytes per second are {IMAGE_BYTES:,} bytes over them). Grain's arrays: {theirs}."
    )
    checks = check_images(build(grainfn, n, 2), n)
    return [Row(P3, "", figures, unit="us", detail=detail, checks=checks)]


# ---------------------------------------------------------------------------
# P4: a state taken with 2 workers, restored with 0 and 1.


def jitter(x: int, rng: np.random.Generator) -> int:
    return 10 * x + int(rng.integers(0, 10))


def keep(x: int) -> bool:
    return x % 7 != 3


def state_pipeline(n: int, workers: int | None) -> Any:
    """Shuffle, random_map, filter, iter-level batch; `mp_prefetch(workers)` unless None."""
    ds = grainfn.MapDataset.range(n).seed(5).shuffle().random_map(jitter).filter(keep)
    ds = ds.to_iter_dataset(grainfn.ReadOptions(num_threads=0)).batch(4)
    if workers is not None:
        ds = ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=workers))
    return ds


def checkpoints(c: Config) -> list[Row]:
    expected = list(state_pipeline(c.state_n, None))
    k = len(expected) // 2
    head, state = take_state(state_pipeline(c.state_n, 2), k)
    checks = {"first half with 2 workers": same_outputs(head, expected[: k + 1])}
    for label, workers in (("0 workers", 0), ("1 worker", 1), ("no mp_prefetch", None)):
        rest = resume(state_pipeline(c.state_n, workers), state)
        checks[f"restored with {label}"] = same_outputs(rest, expected[k:])
    detail = f"{len(expected)} batches read with 2 workers; get_state() after {k}, restored anew."
    return [Row("P4 a state taken", "with 2 workers", {}, detail=detail, checks=checks)]


# ---------------------------------------------------------------------------
# P5 and P6: does an executor earn its place? Cheap work, then CPU-bound work.


SMALL_IMAGES = np.random.default_rng(0).integers(0, 256, (64, 64, 64, 3), dtype=np.uint8)
"""64 images of 64x64x3 uint8 (every worker makes the same: the seed is fixed)."""
P5 = "P5 64x64x3 images flipped"
P6 = "P6 CPU-bound map"


def flipped(index: int) -> np.ndarray:
    """Image `index % 64`, flipped left to right: a strided copy, tens of µs."""
    return np.ascontiguousarray(SMALL_IMAGES[index % 64][:, ::-1])


def steps(quick: bool) -> list[Step]:
    c = QUICK if quick else DEFAULT
    work, heavy = calibrate(0.002), calibrate(0.0003)  # about 2 ms and 0.3 ms per element
    timing = (c.warmup_n, c.cpu_repeats)
    return [
        Step("P1", functools.partial(cpu_bound, c, work)),
        Step("P2", functools.partial(first_element, c, work)),
        Step("P3", functools.partial(images, c)),
        Step("P4", functools.partial(checkpoints, c)),
        Step("P5", functools.partial(earn_their_place, P5, flipped, c.flip_n, *timing)),
        Step("P6", functools.partial(earn_their_place, P6, heavy, c.heavy_n, *timing)),
    ]


def targets(rows: dict[str, Row]) -> list[Target]:
    out = []
    for how in ("end to end", "steady state"):
        speedup = ratio(*(rows[f"P1 {w} workers, {how}"].per_item[GRAINFN] for w in (0, 2)))
        text = f"P1: grainfn 2 workers >= 1.7x faster than 0 workers ({how})"
        out.append(Target.at_least(text, speedup, 1.7))
    out += Target.checks("P1: output {}", rows["P1 2 workers, end to end"].checks)
    for key, where in (("grainfn", "warm"), ("grainfn, new process", "new process")):
        median = rows[f"P2 first element, {where}"].per_item[GRAINFN]
        text = f"P2: {key}: first element with 2 workers <= 0.5 s (median)"
        out.append(Target.at_most(text, median, 0.5, fmt_seconds))
    p3 = rows[P3]
    bytes_rate = functools.partial(fmt_rate, unit="B/s")
    for text, key in (
        ("P3: grainfn >= 1 GB/s of arrays after the first element (best read)", GRAINFN),
        ("P3: the same, median read", "grainfn, median read"),
    ):
        out.append(Target.at_least(text, ratio(IMAGE_BYTES, p3.per_item[key]), 1e9, bytes_rate))
    out += Target.checks("P3: grainfn arrays {}", p3.checks)
    out += Target.checks("P4: state taken with 2 workers, {}", rows["P4 a state taken"].checks)
    for prefix, text, limit in (
        (P5, "P5: grainfn mp_prefetch(2) >= 1.0x of 0 workers on 64x64x3 images flipped", 1.0),
        (P6, "P6: grainfn mp_prefetch(2) >= 1.5x of 0 workers on a 0.3 ms CPU-bound map", 1.5),
    ):
        steady = [rows[f"{prefix} {w} workers, steady state"] for w in (0, 2)]
        speedup = ratio(*(row.per_item[GRAINFN] for row in steady))
        out.append(Target.at_least(f"{text} (steady state)", speedup, limit))
        out += Target.checks(f"{prefix.split()[0]}: output {{}}", steady[1].checks)
    return out


if __name__ == "__main__":
    run_suite("parallel", __doc__ or "", steps, targets)
