"""Tools of the suites that read through worker processes (`parallel`, `dataloader`, `scaling`...).

CPU-bound work (`Spin`), the two libraries, reads timed to the first and last element, rows of 0
against 2 workers, states. Grain is imported only where used: workers re-import this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import grainfn
from benchmarks.harness import GRAINFN, Case, Row, Timer, fmt_ratio, measure, ratio, results

LIBRARIES = ("grainfn", "Grain")
PINNED = "grainfn, workers pinned"


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


def calibrate(target: float) -> Spin:
    """A `Spin` taking about `target` seconds per call here."""
    iterations = 1_000
    while seconds_per_call(Spin(iterations), 5) < target / 4:
        iterations *= 2
    for _ in range(2):  # two corrections: the first estimate includes a cold start
        iterations = max(1, round(iterations * target / seconds_per_call(Spin(iterations), 15)))
    return Spin(iterations)


def spin_range(work: Spin, first: int, stop: int, ready: Any, go: Any, done: Any) -> None:
    """Runs `work` over `[first, stop)` in a plain process once `go` is set; puts the seconds."""
    ready.put(os.getpid())
    go.wait()
    started = time.perf_counter()
    for x in range(first, stop):
        work(x)
    done.put(time.perf_counter() - started)


def plain_processes(work: Spin, n: int, processes: int) -> float:
    """Seconds for `processes` started processes to share `n` calls of `work`: the ceiling."""
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


def libraries() -> dict[str, Any]:
    """The modules giving the Grain API, by name: grainfn's facade and Google Grain."""
    return {name: library(name) for name in LIBRARIES}


def library(name: str) -> Any:
    """grainfn's facade, or Google Grain (imported on first use, absl flags marked parsed)."""
    if name == "grainfn":
        return grainfn
    import grain
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return grain


def close(iterator: Any) -> None:
    """Stops an iterator's workers now rather than when it is garbage collected."""
    if hasattr(iterator, "close"):
        iterator.close()


@contextlib.contextmanager
def reading(ds: Any) -> Iterator[Any]:
    """`iter(ds)`, closed on leaving the block (its workers stopped then)."""
    it = iter(ds)
    try:
        yield it
    finally:
        close(it)


def plural(count: int, one: str) -> str:
    """'1 worker', '2 workers'."""
    return f"{count} {one}{'' if count == 1 else 's'}"


@dataclasses.dataclass(frozen=True)
class Read:
    """When one read of a dataset delivered its first and its last element."""

    first: float  # seconds from `iter(ds)` to the first element
    total: float  # seconds from `iter(ds)` to the end

    @property
    def steady(self) -> float:
        """Seconds from the first element to the end."""
        return self.total - self.first


def timed_read(ds: Any, reads: list[Read], keep: Callable[[Any], Any] | None = None) -> list[Any]:
    """Reads `ds` to the end, the timing appended to `reads`: the elements (or `keep` of each)."""
    started = time.perf_counter()
    it = iter(ds)
    try:
        out = [next(it) if keep is None else keep(next(it))]
        first = time.perf_counter() - started
        out.extend(it if keep is None else map(keep, it))
        total = time.perf_counter() - started
    finally:
        close(it)
    reads.append(Read(first, total))
    return out


def time_workers(
    libraries: Mapping[str, Any],
    build: Callable[[Any, int, int], Any],
    read: Callable[[Any, list[Read]], Any],
    n: int,
    warmup_n: int,
    repeats: int,
    worker_counts: Sequence[int],
) -> tuple[dict[tuple[str, int], list[Read]], dict[tuple[str, int], Any]]:
    """Times `read(build(lib, n, workers))` per library (by name) and worker count, warmed up on
    `warmup_n` elements, runs alternating; returns every run's `Read`, each case's last output."""
    cases: dict[tuple[str, int], Case] = {}
    reads: dict[tuple[str, int], list[Read]] = {}
    for (name, lib), workers in itertools.product(libraries.items(), worker_counts):
        runs = reads.setdefault((name, workers), [])
        small = functools.partial(read, build(lib, warmup_n, workers), [])
        cases[name, workers] = Case(functools.partial(read, build(lib, n, workers), runs), small)
    timer = Timer(repeats, budget=60.0, burst=0.0)
    t = measure({f"{name} {plural(w, 'worker')}": case for (name, w), case in cases.items()}, timer)
    return reads, dict(zip(cases, results(t).values()))


def worker_rows(prefix: str, reads: dict[tuple[str, int], list[Read]], items: int) -> list[Row]:
    """Per worker count, rows of the best times from `iter(ds)` (with median firsts) and after."""
    rows = []
    for workers in sorted({w for _, w in reads}):
        key = f"{prefix} {plural(workers, 'worker')}"
        by_library = {name: runs for (name, w), runs in reads.items() if w == workers}
        total = {k: min(r.total for r in v) / items for k, v in by_library.items()}
        first = {
            f"{k} first": statistics.median(r.first for r in v) / items
            for k, v in by_library.items()
        }
        steady = {k: min(r.steady for r in v) / items for k, v in by_library.items()}
        detail = f"best of {len(by_library[GRAINFN])} run(s); 'first': median time to the first"
        rows.append(Row(f"{key}, end to end", "", total | first, items, detail=detail))
        rows.append(Row(f"{key}, steady state", "", steady, items))
    return rows


@dataclasses.dataclass(frozen=True)
class Iterated:
    """A core stream as `iter()` reads it (what `timed_read` takes)."""

    stream: Any

    def __iter__(self) -> Any:
        return grainfn.fn.iterate(self.stream)


def map_pipeline(
    lib: Any, n: int, transform: Callable[[int], Any], workers: int, buffer: int
) -> Any:
    """`range(n).map(transform)` as an IterDataset, through `mp_prefetch` if `workers` > 0."""
    ds = lib.MapDataset.range(n).map(transform).to_iter_dataset(lib.ReadOptions(num_threads=0))
    if workers:
        options = lib.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=buffer)
        ds = ds.mp_prefetch(options)
    return ds


def earn_their_place(
    prefix: str, transform: Callable[[int], Any], n: int, warmup_n: int, repeats: int
) -> list[Row]:
    """`worker_rows` of `range(n).map(transform)`, 0 and 2 workers, by grainfn, Grain and grainfn
    pinned (`adaptive=False`), elements kept as sums and checked; 2 workers against grainfn's 0."""

    def build(lib: Any, size: int, workers: int) -> Any:
        if lib is not None:
            return map_pipeline(lib, size, transform, workers, 1)
        fn = grainfn.fn
        stream = fn.from_dataset(fn.map(transform, fn.range(size)))
        return Iterated(fn.mp_prefetch(workers, stream, adaptive=False) if workers else stream)

    def checksum(element: Any) -> int:
        return int(np.asarray(element).sum())

    cases = libraries() | {PINNED: None}
    expected = [checksum(transform(x)) for x in range(n)]
    read = functools.partial(timed_read, keep=checksum)
    reads, outputs = time_workers(cases, build, read, n, warmup_n, repeats, (0, 2))
    checks = {f"{name} 2 workers = the map here": outputs[name, 2] == expected for name in cases}
    checks["grainfn 0 workers = the map here"] = outputs[GRAINFN, 0] == expected
    rows = {row.key: row for row in worker_rows(prefix, reads, n)}

    def against_zero(name: str, how: str) -> str:
        zero, two = (rows[f"{prefix} {w} workers, {how}"].per_item for w in (0, 2))
        return fmt_ratio(ratio(zero[GRAINFN], two[name]))

    ratios = "; ".join(
        f"{name} {against_zero(name, 'end to end')} end to end, "
        f"{against_zero(name, 'steady state')} from the first element on"
        for name in cases
    )
    detail = f"{n:,} elements, best of {repeats} read(s); 2 workers against grainfn's 0: {ratios}."
    key = f"{prefix} 2 workers, steady state"
    rows[key] = dataclasses.replace(rows[key], detail=detail, checks=checks)
    return list(rows.values())


def take_state(ds: Any, k: int) -> tuple[list[Any], Any]:
    """A new read of `ds`: its first `k` elements and one more, and its state after `k` (taken
    while the workers read on: the state must not move with them)."""
    with reading(ds) as it:
        head = [next(it) for _ in range(k)]
        state = it.get_state()
        return [*head, next(it)], state


def resume(ds: Any, state: Any) -> list[Any]:
    """The rest of a new read of `ds` restored to `state`."""
    with reading(ds) as it:
        it.set_state(state)
        return list(it)
