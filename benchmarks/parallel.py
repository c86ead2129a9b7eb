"""Worker-process benchmarks: grainfn's `mp_prefetch` against Grain's, the same code for both.

P1: a ~2 ms map, 0, 1 and 2 workers, and the ceiling; P2: the first element; P3: 768 KiB arrays;
P4: a state taken with 2 workers; P5, P6: a cheap flip and a ~0.3 ms map, 0 and 2 workers. Grain
is imported only where used: spawned workers re-import this module. See docs/performance.md.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks import workers as wk
from benchmarks.run import run_suite

IMAGE_SHAPE = (64, 64, 64, 3)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
P3 = f"P3 {IMAGE_BYTES // 2**10} KiB arrays, 2 workers"


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    cpu_n: int = 400  # P1: elements of the CPU-bound map
    cpu_repeats: int = 5  # P1, P5, P6: timed runs per case
    warmup_n: int = 8  # elements of the small pipelines every case is warmed up on
    first_trials: int = 7  # P2: trials per library
    image_n: int = 300  # P3: arrays per read
    image_repeats: int = 5  # P3: timed reads per library
    state_n: int = 2_000  # P4: size of the range the checkpointed pipeline starts from
    flip_n: int = 40_000  # P5: images per read
    heavy_n: int = 2_000  # P6: elements of the CPU-bound map


DEFAULT = Config()
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


def cpu_bound(c: Config, work: wk.Spin) -> list[h.Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return wk.map_pipeline(lib, size, work, workers, 1)

    timing = (c.cpu_n, c.warmup_n, c.cpu_repeats, (0, 1, 2))
    reads, outputs = wk.time_workers(wk.libraries(), build, wk.timed_read, *timing)
    ours = outputs["grainfn", 2]
    h.require(len(ours) == c.cpu_n, "P1: grainfn lost elements")
    checks = {
        "grainfn 2 workers = grainfn 0 workers": ours == outputs["grainfn", 0],
        "grainfn 2 workers = Grain 2 workers": ours == outputs["Grain", 2],
        "all six outputs equal": all(out == ours for out in outputs.values()),
        "= the map applied in this process": ours == [work(x) for x in range(c.cpu_n)],
    }
    plain: dict[int, list[float]] = {1: [], 2: []}  # the ceiling, measured after the libraries
    for _ in range(max(2, c.cpu_repeats)):
        for processes, runs in plain.items():
            runs.append(wk.plain_processes(work, c.cpu_n, processes))
    ceiling = h.ratio(min(plain[1]), min(plain[2]))
    rows = {row.key: row for row in wk.worker_rows("P1", reads, c.cpu_n)}
    steady = h.ratio(*(rows[f"P1 {w} workers, steady state"].per_item[h.GRAINFN] for w in (0, 2)))
    detail = (
        f"{c.cpu_n} elements, spin of {work.iterations:,} loop steps. The same calls take "
        f"{h.fmt_seconds(min(plain[2]))} in 2 plain processes already started, against "
        f"{h.fmt_seconds(min(plain[1]))} in 1: a ceiling of {h.fmt_ratio(ceiling)}; grainfn's "
        f"steady-state speed-up with 2 workers is {h.fmt_ratio(h.ratio(steady, ceiling))} of it."
    )
    key = "P1 2 workers, end to end"
    rows[key] = dataclasses.replace(rows[key], detail=detail, checks=checks)
    return list(rows.values())


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
    """Seconds from `iter(ds)` to the first element in a fresh interpreter (nothing warm)."""
    command = [sys.executable, "-c", COLD_START, name]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    return float(done.stdout.strip().splitlines()[-1])


def first_element(c: Config, work: wk.Spin) -> list[h.Row]:
    datasets = {
        name: wk.map_pipeline(wk.library(name), c.cpu_n, work, 2, 1) for name in wk.LIBRARIES
    }
    warm: dict[str, list[float]] = {name: [] for name in wk.LIBRARIES}
    for _ in range(c.first_trials):
        for name, ds in datasets.items():  # the libraries take turns
            started = time.perf_counter()
            it = iter(ds)
            next(it)
            warm[name].append(time.perf_counter() - started)
            wk.close(it)
    cold: dict[str, list[float]] = {name: [] for name in wk.LIBRARIES}
    for _ in range(max(1, c.first_trials // 2)):
        for name in wk.LIBRARIES:
            cold[name].append(cold_first_element(name))
    rows = []
    for where, times in (("warm", warm), ("new process", cold)):
        spread = "; ".join(
            f"{k} {h.fmt_seconds(min(v))} to {h.fmt_seconds(max(v))}" for k, v in times.items()
        )
        detail = f"median of {len(times['grainfn'])} trials, 2 workers; min to max: {spread}"
        figures = {name: statistics.median(values) for name, values in times.items()}
        rows.append(h.Row(f"P2 first element, {where}", "", figures, detail=detail))
    return rows


def make_image(index: int) -> np.ndarray:
    """An image-like array, every byte `index % 256`: cheap to make, 768 KiB to move."""
    return np.full(IMAGE_SHAPE, index % 256, dtype=np.uint8)


def check_images(ds: Any, n: int) -> dict[str, bool]:
    """Reads `ds` untimed: every array of the right shape and bytes, and writable."""
    correct, writable, count = True, True, 0
    with wk.reading(ds) as it:
        for index, image in enumerate(it):
            count, value = count + 1, index % 256
            right_kind = image.shape == IMAGE_SHAPE and image.dtype == np.uint8
            correct &= right_kind and bool((image == value).all())
            try:
                image[-1, -1, -1, -1] = 255 - value
                writable &= int(image[-1, -1, -1, -1]) == 255 - value
            except ValueError:  # a read-only array
                writable = False
    return {"correct": correct and count == n, "writable": writable}


def images(c: Config) -> list[h.Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return wk.map_pipeline(lib, size, make_image, workers, 2)

    def first_byte(image: np.ndarray) -> int:  # what is kept of an array: checked below
        return int(image.flat[0])

    n, read = c.image_n, functools.partial(wk.timed_read, keep=first_byte)
    timing = (n, c.warmup_n, c.image_repeats, (2,))
    reads, outputs = wk.time_workers(wk.libraries(), build, read, *timing)
    figures = {}  # seconds per array after the first (best, median read), from iter(ds), first
    for name in wk.LIBRARIES:
        h.require(outputs[name, 2] == [i % 256 for i in range(n)], f"P3: {name} lost arrays")
        runs = reads[name, 2]
        figures[name] = min(r.steady for r in runs) / (n - 1)
        figures[f"{name}, median read"] = statistics.median(r.steady for r in runs) / (n - 1)
        figures[f"{name} from iter(ds)"] = min(r.total for r in runs) / n
        figures[f"{name} first"] = statistics.median(r.first for r in runs)
    theirs = check_images(build(wk.library("Grain"), n, 2), n)
    detail = (
        f"{n} arrays, {c.image_repeats} read(s) per library; seconds per array received (the "
        f"bytes per second are {IMAGE_BYTES:,} bytes over them). Grain's arrays: {theirs}."
    )
    checks = check_images(build(grainfn, n, 2), n)
    return [h.Row(P3, "", figures, unit="us", detail=detail, checks=checks)]


def jitter(x: int, rng: np.random.Generator) -> int:
    return 10 * x + int(rng.integers(0, 10))


def keep(x: int) -> bool:
    return x % 7 != 3


def state_pipeline(n: int, workers: int | None) -> Any:
    """Shuffle, random_map, filter, iter-level batch; `mp_prefetch(workers)` unless None."""
    ds = grainfn.MapDataset.range(n).seed(5).shuffle().random_map(jitter).filter(keep)
    batches = ds.to_iter_dataset(grainfn.ReadOptions(num_threads=0)).batch(4)
    if workers is None:
        return batches
    return batches.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=workers))


def checkpoints(c: Config) -> list[h.Row]:
    expected = list(state_pipeline(c.state_n, None))
    k = len(expected) // 2
    head, state = wk.take_state(state_pipeline(c.state_n, 2), k)
    checks = {"first half with 2 workers": h.same_outputs(head, expected[: k + 1])}
    for label, workers in (("0 workers", 0), ("1 worker", 1), ("no mp_prefetch", None)):
        rest = wk.resume(state_pipeline(c.state_n, workers), state)
        checks[f"restored with {label}"] = h.same_outputs(rest, expected[k:])
    detail = f"{len(expected)} batches read with 2 workers; get_state() after {k}, restored anew."
    return [h.Row("P4 a state taken", "with 2 workers", {}, detail=detail, checks=checks)]


SMALL_IMAGES = np.random.default_rng(0).integers(0, 256, (64, 64, 64, 3), dtype=np.uint8)
"""64 images of 64x64x3 uint8 (every worker makes the same: the seed is fixed)."""
P5 = "P5 64x64x3 images flipped"
P6 = "P6 CPU-bound map"


def flipped(index: int) -> np.ndarray:
    """Image `index % 64`, flipped left to right: a strided copy, tens of µs."""
    return np.ascontiguousarray(SMALL_IMAGES[index % 64][:, ::-1])


def steps(c: Config) -> list[h.Step]:
    work, heavy = wk.calibrate(0.002), wk.calibrate(0.0003)  # about 2 ms and 0.3 ms per element
    timing = (c.warmup_n, c.cpu_repeats)
    return [
        h.Step("P1", functools.partial(cpu_bound, c, work)),
        h.Step("P2", functools.partial(first_element, c, work)),
        h.Step("P3", functools.partial(images, c)),
        h.Step("P4", functools.partial(checkpoints, c)),
        h.Step("P5", functools.partial(wk.earn_their_place, P5, flipped, c.flip_n, *timing)),
        h.Step("P6", functools.partial(wk.earn_their_place, P6, heavy, c.heavy_n, *timing)),
    ]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    out = []
    for how in ("end to end", "steady state"):
        speedup = h.ratio(*(rows[f"P1 {w} workers, {how}"].per_item[h.GRAINFN] for w in (0, 2)))
        text = f"P1: grainfn 2 workers >= 1.7x faster than 0 workers ({how})"
        out.append(h.Target.at_least(text, speedup, 1.7))
    out += h.Target.checks("P1: output {}", rows["P1 2 workers, end to end"].checks)
    for key, where in (("grainfn", "warm"), ("grainfn, new process", "new process")):
        median = rows[f"P2 first element, {where}"].per_item[h.GRAINFN]
        text = f"P2: {key}: first element with 2 workers <= 0.5 s (median)"
        out.append(h.Target.at_most(text, median, 0.5, h.fmt_seconds))
    p3 = rows[P3]
    bytes_rate = functools.partial(h.fmt_rate, unit="B/s")
    for text, key in (
        ("P3: grainfn >= 1 GB/s of arrays after the first element (best read)", h.GRAINFN),
        ("P3: the same, median read", "grainfn, median read"),
    ):
        out.append(h.Target.at_least(text, h.ratio(IMAGE_BYTES, p3.per_item[key]), 1e9, bytes_rate))
    out += h.Target.checks("P3: grainfn arrays {}", p3.checks)
    out += h.Target.checks("P4: state taken with 2 workers, {}", rows["P4 a state taken"].checks)
    for prefix, text, limit in (
        (P5, "P5: grainfn mp_prefetch(2) >= 1.0x of 0 workers on 64x64x3 images flipped", 1.0),
        (P6, "P6: grainfn mp_prefetch(2) >= 1.5x of 0 workers on a 0.3 ms CPU-bound map", 1.5),
    ):
        steady = [rows[f"{prefix} {w} workers, steady state"] for w in (0, 2)]
        speedup = h.ratio(*(row.per_item[h.GRAINFN] for row in steady))
        out.append(h.Target.at_least(f"{text} (steady state)", speedup, limit))
        out += h.Target.checks(f"{prefix.split()[0]}: output {{}}", steady[1].checks)
    return out


if __name__ == "__main__":
    run_suite("parallel", __doc__ or "", steps, targets, DEFAULT, QUICK)
