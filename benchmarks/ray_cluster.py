"""Preprocessing on Ray actors (`fn.ray_prefetch`) against worker processes (`fn.mp_prefetch`).

A local Ray of 2 CPUs, 2 actors kept warm, against `mp_prefetch(2)` and reading here. R1: a ~1 ms
map, shuffled, batches of 16; R2: a block's round trip, and 1 MiB back. Elements checked equal.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any

import numpy as np

from benchmarks import harness as h
from benchmarks.run import run_suite
from benchmarks.workers import Read, Spin, calibrate, timed_read
from grainfn import fn

RAY = "grainfn ray 2 actors"
MP = "grainfn mp_prefetch(2)"
HERE = "grainfn here"
RAY_FIRST, MP_FIRST = "ray first batch", "mp first batch"


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    count: int = 2000  # R1: elements of the heavy map


DEFAULT, QUICK = Config(), Config(count=400)


def heavy_stream(work: Spin, count: int) -> Any:
    return fn.batch(16, fn.from_dataset(fn.map(work, fn.shuffle(fn.range(count), seed=0))))


def start_ray() -> Any:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return fn.RayPool(2, num_cpus=1)


def heavy_rows(count: int) -> list[h.Row]:
    work = calibrate(0.001)
    stream = heavy_stream(work, count)
    pool = start_ray()
    pool.start()
    reads: dict[str, list[Read]] = {RAY: [], MP: [], HERE: []}
    readers = {RAY: fn.ray_prefetch(pool, stream), MP: fn.mp_prefetch(2, stream), HERE: stream}

    def read(label: str) -> list[Any]:  # the iterator is made before the timed read starts
        return timed_read(fn.iterate(readers[label]), reads[label])

    cases = {label: h.Case(functools.partial(read, label)) for label in readers}
    try:
        timings = h.measure(cases, h.Timer(repeats=3, budget=60.0, burst=0.0))
    finally:
        pool.close()
    want = [b.tolist() for b in timings[HERE].result]
    for label, timing in timings.items():
        h.require([b.tolist() for b in timing.result] == want, f"R1: {label} read other batches")
    steady = {label: min(r.steady for r in runs) / count for label, runs in reads.items()}
    first = {RAY_FIRST: min(r.first for r in reads[RAY]), MP_FIRST: min(r.first for r in reads[MP])}
    detail = (
        f"{count} elements of about 1 ms (Spin({work.iterations})), shuffled, batches of 16, "
        f"{os.cpu_count()} cores; per element from the first batch on; first batch: best seconds"
    )
    return [
        h.Row("R1", "CPU-heavy map, steady state", steady, unit="us", subject=RAY, detail=detail),
        h.Row("R1f", "time to the first batch", first, subject=RAY_FIRST),
    ]


def per_block(submit: Any, blocks: int) -> float:
    """The median seconds of a block read by `submit(first, stop).result()`, one at a time."""
    times = []
    for position in range(blocks):
        started = time.perf_counter()
        submit(position, position + 1).result()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def cost_rows() -> list[h.Row]:
    from grainfn._src.parallel.processes import WorkerPool

    cheap = fn.range(10**6)
    megabyte = fn.map(lambda x: np.full(2**18, x, np.float32), fn.range(10**6))  # 1 MiB each
    pool = start_ray()
    session = pool.session([cheap, megabyte])
    try:
        session.start()
        call = {RAY: per_block(session.executor(0).submit, 50)}
        moved = {RAY: per_block(session.executor(1).submit, 50)}
    finally:
        session.close()
        pool.close()
    workers = WorkerPool([cheap, megabyte], 1, 1, None, None)
    try:
        workers.start()
        call[MP] = per_block(lambda a, b: workers.submit(0, a, b), 50)
        moved[MP] = per_block(lambda a, b: workers.submit(1, a, b), 50)
    finally:
        workers.close()
    note = "median of 50 blocks of one element, each sent when the last came back; pools warm"
    return [
        h.Row("R2a", "a block's round trip", call, unit="s", subject=RAY, detail=note),
        h.Row("R2b", "a block of 1 MiB, round trip", moved, unit="s", subject=RAY, detail=note),
    ]


def steps(c: Config) -> list[h.Step]:
    return [h.Step("R1", lambda: heavy_rows(c.count)), h.Step("R2", cost_rows)]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    heavy, first = rows["R1"], rows["R1f"]
    text = "R1: Ray's first batch (warm pool) <= mp_prefetch's"
    return [
        h.Target.at_most("R1: Ray 2 actors within 1.2x of mp_prefetch(2)", heavy.over(MP), 1.2),
        h.Target.at_most(text, first.ratio(RAY_FIRST, MP_FIRST), 1.0),
    ]


if __name__ == "__main__":
    run_suite("ray_cluster", __doc__ or "", steps, targets, DEFAULT, QUICK)
