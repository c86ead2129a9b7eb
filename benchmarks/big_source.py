"""Big in-memory sources with workers: the first batch, the epoch and the workers' memory.

M1: `MapDataset.source(images).seed(0).shuffle().random_map(flip).to_iter_dataset().batch(64)`
over a big uint8 array, one run each: grainfn with 0 workers, 2 (the facade, `fn.mp_prefetch`), 2
Ray actors, Grain with 0 and 2, torch with 2. M2: a custom source class, 0 and 2 workers.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import importlib.util
import itertools
import os
import time
from multiprocessing import active_children
from typing import Any

import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks import workers as wk
from benchmarks.run import run_suite
from grainfn import fn

BATCH, SHAPE, CHECKED = 64, (64, 64, 3), 3  # CHECKED: the first batches compared
ZERO, FACADE, CORE = "grainfn 0 workers", "grainfn 2 workers", "fn.mp_prefetch(2)"
RAY, GRAIN2, GRAIN0 = "ray_prefetch 2 actors", "Grain 2 workers", "Grain 0 workers"
TORCH = "torch 2 workers"
Run = collections.namedtuple("Run", "first epoch memory head sampled")  # s, s, bytes, batches


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    n: int = 100_000  # M1: images of the array
    tiny: int = 100  # M1: images of the source whose workers' memory is subtracted
    sample_at: int = 20  # M1: the memory is sampled every this many batches, the peak kept
    grain_batches: int | None = 300  # M1: Grain reads this many batches, the epoch extrapolated
    custom_n: int = 20_000  # M2: images of the custom source
    repeats: int = 5  # M2: timed reads per case (best of: a 0.3 s read varies by 10%)


DEFAULT = Config()
QUICK = Config(n=10_000, grain_batches=None, custom_n=5_000, repeats=1)


def flip(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return x[:, ::-1] if rng.random() < 0.5 else x


@dataclasses.dataclass(frozen=True, eq=False)
class ImageSource:
    """A custom source: image `i` of the array it holds (tiled to `length`), flipped for torch."""

    images: np.ndarray
    flipped: bool = False
    length: int = 0

    def __len__(self) -> int:
        return self.length or len(self.images)

    def __getitem__(self, i: int) -> np.ndarray:
        image = self.images[i % len(self.images)]
        return np.ascontiguousarray(flip(image, np.random.default_rng())) if self.flipped else image


def pipeline(lib: Any, source: Any, workers: int = 0) -> Any:
    if lib is fn:  # the core API
        stages = fn.random_map(flip, fn.shuffle(fn.seed(0, fn.source(source))))
        return wk.Iterated(fn.mp_prefetch(workers, fn.batch(BATCH, fn.from_dataset(stages))))
    ds = lib.MapDataset.source(source).seed(0).shuffle().random_map(flip)
    ds = ds.to_iter_dataset().batch(BATCH)
    return ds.mp_prefetch(lib.MultiprocessingOptions(num_workers=workers)) if workers else ds


def rss_anon(processes: list[Any]) -> int:
    """The private memory (RssAnon of /proc/PID/status) of the processes (or pids), in bytes."""
    total = 0
    for pid in (getattr(process, "pid", process) for process in processes):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="ascii") as f:
            total += sum(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))
    return total


def ray_actors() -> list[int]:
    """The processes named ray::BlockActor (the pool's actors) under Ray's raylet, our child."""
    parent, named = {}, []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                parent[pid] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                named += [pid] * f.read().startswith(b"ray::BlockActor")
    return [pid for pid in named if parent.get(parent.get(pid, 0)) == os.getpid()]


def read(ds: Any, pids: Any, n: int, c: Config, limit: int | None) -> Run:
    """One run of `ds` from `iter()`, at most `limit` batches (the epoch extrapolated then)."""
    started, paused, memory, head, count, first = time.perf_counter(), 0.0, 0, [], 0, 0.0
    it = iter(ds)
    try:
        for batch in itertools.islice(it, limit):
            first = first if count else time.perf_counter() - started
            head += [np.asarray(batch)] if count < CHECKED else []
            count += 1
            if count % c.sample_at == 0:  # the peak, sampled; the sampling's time is not counted
                clock, memory = time.perf_counter(), max(memory, rss_anon(pids()))
                paused += time.perf_counter() - clock
        total = time.perf_counter() - started - paused
        memory = max(memory, rss_anon(pids()))
    finally:
        wk.close(it)
    batches, sampled = -(-n // BATCH), count == limit
    h.require(limit is not None or count == batches, f"M1: {count} batches")  # Grain's batch apart
    epoch = first + (total - first) * (batches - 1) / (count - 1) if sampled else total
    return Run(first, epoch, memory, head, sampled)


def big_array(c: Config) -> list[h.Row]:
    images = np.random.default_rng(0).integers(0, 255, (c.n, *SHAPE), dtype=np.uint8)
    tiny, runs, memory = ImageSource(images[: c.tiny].copy(), length=c.n), {}, {}

    def one(label: str, build: Any, pids: Any = None) -> None:  # a fresh pipeline for each run
        limit = (c.grain_batches or 10**9) if label.startswith("Grain") else None
        base = 0 if pids is None else read(build(tiny), pids, c.n, c, limit).memory
        runs[label] = read(build(images), pids or list, c.n, c, limit)
        memory.update({label: max(0, runs[label].memory - base) / images.nbytes} if pids else {})

    read(pipeline(grainfn, tiny, workers=2), list, c.n, c, None)  # grainfn's fork server started
    one(ZERO, functools.partial(pipeline, grainfn))
    one(FACADE, functools.partial(pipeline, grainfn, workers=2), active_children)
    one(CORE, functools.partial(pipeline, fn, workers=2), active_children)
    one(GRAIN2, functools.partial(pipeline, wk.library("Grain"), workers=2), active_children)
    one(GRAIN0, functools.partial(pipeline, wk.library("Grain")))
    if importlib.util.find_spec("torch") is None:
        print("big_source: torch is not installed: no torch DataLoader figures")
    else:
        from torch.utils.data import DataLoader

        loader = functools.partial(DataLoader, batch_size=BATCH, shuffle=True, num_workers=2)
        one(TORCH, lambda source: loader(ImageSource(source, flipped=True)), active_children)
    ray = importlib.import_module("ray")  # not at the top: Grain's workers import this module
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with fn.RayPool(2, num_cpus=0) as pool:
            pool.start()  # before the timing
            actors = ray_actors()
            h.require(len(actors) == 2, f"M1: the pool's actors not found: {actors}")
            one(RAY, lambda source: pipeline(grainfn, source).ray_prefetch(pool), lambda: actors)
    finally:
        ray.shutdown()
    for label in (FACADE, CORE, RAY):
        h.require(h.same_outputs(runs[label].head, runs[ZERO].head), f"M1: {label} != 0 workers")
    checks = {f"{GRAIN0} = {ZERO}": h.same_outputs(runs[GRAIN0].head, runs[ZERO].head)}
    order = [k for k in (ZERO, FACADE, CORE, RAY, GRAIN2, GRAIN0, TORCH) if k in runs]
    sampled = tuple(k for k in order if runs[k].sampled)
    size = f"{c.n:,} images of 64x64x3 uint8 ({images.nbytes / 1e9:.2f} GB), one run each"
    size += "; torch is not installed" * (TORCH not in runs)
    extrapolated = f"; Grain read {c.grain_batches} batches, the epoch extrapolated" * bool(sampled)
    detail = (
        f"the peak of the workers' RssAnon (/proc/PID/status), sampled every {c.sample_at} batches,"
        f" less the same for {c.tiny} images tiled to {c.n:,}, over the source's bytes (workers:"
        " multiprocessing.active_children(); Ray: its ray::BlockActor processes)"
    )
    first, epoch = ({k: getattr(runs[k], what) for k in order} for what in ("first", "epoch"))
    memory = {k: memory[k] for k in order if k in memory}
    return [
        h.Row("M1 first batch", "", first, subject=FACADE, detail=size, checks=checks),
        h.Row("M1 epoch", "", epoch, subject=FACADE, detail=size + extrapolated, sampled=sampled),
        h.Row("M1 memory", "", memory, unit="x", subject=FACADE, detail=detail),
    ]


def custom(c: Config) -> list[h.Row]:
    images = np.random.default_rng(1).integers(0, 255, (c.custom_n, *SHAPE), dtype=np.uint8)

    def build(lib: Any, size: int, workers: int) -> Any:
        return pipeline(lib, ImageSource(images[:size]), workers)

    timing = (c.custom_n, 2 * BATCH, c.repeats, (0, 2))
    reads, out = wk.time_workers(wk.libraries(), build, wk.timed_read, *timing)
    same = h.same_outputs(out["grainfn", 2], out["grainfn", 0])
    h.require(same and len(out["grainfn", 0]) == -(-c.custom_n // BATCH), "M2: grainfn's batches")
    checks = {f"{GRAIN0} = {ZERO}": h.same_outputs(out["Grain", 0], out["grainfn", 0])}
    rows = [row for row in wk.worker_rows("M2", reads, c.custom_n) if "end to end" in row.key]
    detail = f"{c.custom_n:,} images of 64x64x3 uint8 from a class holding the array"
    return [dataclasses.replace(rows[0], detail=detail, checks=checks), rows[1]]


def steps(c: Config) -> list[h.Step]:
    return [h.Step(k, functools.partial(f, c)) for k, f in (("M1", big_array), ("M2", custom))]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    first, epoch, memory = (rows[f"M1 {what}"] for what in ("first batch", "epoch", "memory"))
    out = []
    for label, seconds, slower in ((FACADE, 0.5, 1.15), (CORE, 0.5, 1.15), (RAY, 1.0, 1.5)):
        text = f"M1 first batch: {label} <= {seconds} s"
        out.append(h.Target.at_most(text, first.per_item.get(label), seconds, h.fmt_seconds))
        text = f"M1 epoch: {label} <= {slower}x {ZERO}"
        out.append(h.Target.at_most(text, epoch.ratio(label, ZERO), slower))
        text = f"M1 memory: {label} <= 0.25x the source's bytes"
        out.append(h.Target.at_most(text, memory.per_item.get(label), 0.25))
    out += h.Target.checks("M1 first batch: {}", first.checks)
    zero, two = (rows[f"M2 {w} workers, end to end"] for w in (0, 2))
    speedup = h.ratio(zero.per_item[h.GRAINFN], two.per_item[h.GRAINFN])
    text = "M2 2 workers, end to end: grainfn >= 1.0x the throughput of 0 workers"
    out.append(h.Target.at_least(text, speedup, 1.0))
    return out + h.Target.checks("M2 0 workers, end to end: {}", zero.checks)


if __name__ == "__main__":
    run_suite("big_source", __doc__ or "", steps, targets, DEFAULT, QUICK)
