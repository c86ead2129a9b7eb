"""Tools of the suites that read through worker processes (`parallel`, `dataloader`).

The work (`Spin`, a CPU-bound map calibrated to a time per call), the two
libraries giving the Grain API, reads timed from `iter(ds)` to the first element
and to the last, and states taken and restored. Grain is imported only where
used: spawned workers re-import the suites and this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import grainfn
from benchmarks.harness import GRAINFN, Case, Row, Timer, measure, results

LIBRARIES = ("grainfn", "Grain")


# ---------------------------------------------------------------------------
# The work and the libraries.


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


# ---------------------------------------------------------------------------
# Reads through worker processes: when the first element came, and the last.


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
    """Reads `ds` to the end, appends the timing to `reads`; returns the elements, or
    `keep(element)` of each where `keep` is given."""
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
    """Times `read(build(lib, n, workers))` for each of the `libraries` (by name) and worker count,
    warmed up on `warmup_n` elements, the runs alternating one by one, each starting its own
    workers as a new `iter(ds)` does; returns every run's `Read` and each case's last output."""
    cases, reads = {}, {}
    for (name, lib), workers in itertools.product(libraries.items(), worker_counts):
        runs = reads.setdefault((name, workers), [])
        small = functools.partial(read, build(lib, warmup_n, workers), [])
        cases[name, workers] = Case(functools.partial(read, build(lib, n, workers), runs), small)
    timer = Timer(repeats, budget=60.0, burst=0.0)
    t = measure({f"{name} {plural(w, 'worker')}": case for (name, w), case in cases.items()}, timer)
    return reads, dict(zip(cases, results(t).values()))


def worker_rows(prefix: str, reads: dict[tuple[str, int], list[Read]], items: int) -> list[Row]:
    """Per worker count, a row of each library's best time from `iter(ds)` to the end, with the
    median time to the first element, and a row of its best time from the first element on."""
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


# ---------------------------------------------------------------------------
# States taken while workers read on, and restored.


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
