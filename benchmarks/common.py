"""Shared measuring helpers of the grainfn benchmark suite: timing, formatting, checks.

Timing is wall-clock `time.perf_counter`, best of R runs after one untimed
warm-up; the garbage collector stays enabled (as in a real input pipeline), with
a full collection before the first timed run and a young-generation one before
each run, so that one run's garbage is not billed to the next.

The report around the figures (result rows, tables, targets, the command line
and the Markdown file) is in `benchmarks.report`.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------
# Timing.


@dataclasses.dataclass
class Timing:
    """The outcome of measuring one implementation: every timed run, and its last result."""

    label: str
    runs: list[float]
    result: Any = dataclasses.field(repr=False, default=None)

    @property
    def best(self) -> float:
        """The fastest run, in seconds (what the tables report)."""
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def describe(self) -> str:
        return (
            f"{self.label}: best {self.best:.4g} s, median {self.median:.4g} s, "
            f"worst {max(self.runs):.4g} s of {len(self.runs)} run(s)"
        )


@dataclasses.dataclass
class Case:
    """One implementation to time with `measure_all`.

    Attributes:
        label: Name printed with the result.
        run: The work to time; the return value of its last run is kept in
            `Timing.result` so the caller can check it.
        warmup: True: call `run()` once untimed first. A callable: call it
            instead (a cheaper warm-up, e.g. the same pipeline on a small input,
            for implementations too slow to run twice). False: none.
        setup: Called untimed before the warm-up and before every timed run,
            e.g. to clear caches so that every run starts cold.
        repeats, min_time, budget: Override `measure_all`'s for this case.
    """

    label: str
    run: Callable[[], Any]
    warmup: bool | Callable[[], Any] = True
    setup: Callable[[], Any] | None = None
    repeats: int | None = None
    min_time: float | None = None
    budget: float | None = None


def measure_all(
    cases: Sequence[Case],
    *,
    repeats: int = 5,
    min_time: float = 0.0,
    max_repeats: int = 100,
    budget: float = 15.0,
    burst: float = 1.0,
    verbose: bool = True,
) -> list[Timing]:
    """Best-of-R wall times of several implementations of the same work, runs interleaved.

    Every case is warmed up first; then the timed runs go round-robin in
    bursts: each unfinished case runs back to back until its burst has lasted
    `burst` seconds (at least one run), then the next case's turn comes. So all
    cases see the same machine (on a shared or virtual machine, other load and
    slow phases lasting seconds hit every implementation alike instead of
    whichever ran at the time), while the runs within a burst still reach the
    steady state of a loop that repeats the same work (warm caches, a grown
    heap), which is what the best run reports.

    A case is finished once it has at least `repeats` runs totalling at least
    `min_time` seconds, or `max_repeats` runs, or when its next run would likely
    take its total past `budget` seconds. Every case gets at least one timed
    run, however slow.
    """
    for case in cases:
        if case.setup is not None:
            case.setup()
        if case.warmup is True:
            case.run()
        elif callable(case.warmup):
            case.warmup()
    timings = [Timing(case.label, []) for case in cases]
    gc.collect()
    active = list(range(len(cases)))
    while active:
        for i in list(active):
            case, timing = cases[i], timings[i]
            limits = (
                repeats if case.repeats is None else case.repeats,
                min_time if case.min_time is None else case.min_time,
                max_repeats,
                budget if case.budget is None else case.budget,
            )
            burst_start = time.perf_counter()
            while _wants_more(timing.runs, *limits):
                timing.result = None  # drop the previous result before the next run allocates
                if case.setup is not None:
                    case.setup()
                gc.collect(0)  # cheap; the full collection ran once before the first round
                start = time.perf_counter()
                timing.result = case.run()
                timing.runs.append(time.perf_counter() - start)
                if time.perf_counter() - burst_start >= burst:
                    break
            if not _wants_more(timing.runs, *limits):
                active.remove(i)
    if verbose:
        for timing in timings:
            print(f"  {timing.describe()}", flush=True)
    return timings


def measure(label: str, run: Callable[[], Any], **options: Any) -> Timing:
    """Best-of-R wall time of `run()` alone; `options` as in `Case` and `measure_all`."""
    case_fields = {f.name for f in dataclasses.fields(Case)}
    case = Case(label, run, **{k: v for k, v in options.items() if k in case_fields})
    rest = {k: v for k, v in options.items() if k not in case_fields}
    return measure_all([case], **rest)[0]


def _wants_more(
    runs: list[float], repeats: int, min_time: float, max_repeats: int, budget: float
) -> bool:
    if not runs:
        return True
    total = sum(runs)
    if len(runs) >= max(1, max_repeats) or total + runs[-1] > budget:
        return False
    return len(runs) < repeats or total < min_time


class CpuMonitor:
    """CPU seconds that other processes used on this machine while we ran (Linux only).

    A benchmark on a shared machine should say whether it had the machine to
    itself; `other_cpu_seconds()` is the busy CPU time of the whole machine
    since `start()` minus this process's own.
    """

    def __init__(self) -> None:
        self._start: tuple[float, float, float] | None = None

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy = (sum(fields[:8]) - idle) / ticks  # user .. steal, without guest time
        own = sum(os.times()[:4])  # user + system, of this process and its children
        return busy, own, time.perf_counter()

    def start(self) -> CpuMonitor:
        self._start = self._sample()
        return self

    def other_cpu_seconds(self) -> tuple[float, float] | None:
        """(CPU seconds used by other processes, wall seconds) since `start()`."""
        end = self._sample()
        if self._start is None or end is None:
            return None
        busy, own, wall = (b - a for a, b in zip(self._start, end))
        return max(0.0, busy - own), wall


# ---------------------------------------------------------------------------
# Formatting.

MISSING = "n/a"
"""What a table shows for an implementation that does not apply or was not run."""


def fmt_seconds(seconds: float | None) -> str:
    """A duration with 3 significant digits: '1.23 s', '45.6 ms', '789 µs'."""
    if seconds is None or math.isnan(seconds):
        return MISSING
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def fmt_micros(seconds: float | None) -> str:
    """A per-item time in microseconds: '3.41 µs'."""
    if seconds is None or math.isnan(seconds):
        return MISSING
    return f"{seconds * 1e6:.3g} µs"


def fmt_rate(per_second: float | None, unit: str = "/s") -> str:
    """A rate with an SI prefix: '1.50 M/s', '82.4 k/s'."""
    if per_second is None or math.isnan(per_second):
        return MISSING
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= factor:
            return f"{per_second / factor:.3g} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


def fmt_ratio(ratio: float | None) -> str:
    """A ratio such as a speed-up: '12.3x', '0.85x'."""
    if ratio is None or math.isnan(ratio):
        return MISSING
    if ratio >= 100:
        return f"{ratio:.0f}x"
    return f"{ratio:.3g}x"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """`numerator / denominator`, or None if either is missing."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def yes_no(ok: bool) -> str:
    """'yes' or 'no', for the result of a check."""
    return "yes" if ok else "no"


# ---------------------------------------------------------------------------
# Checks of the outputs.


def require(condition: bool, message: str) -> None:
    """Stops the benchmark with `message` if `condition` is false."""
    if not condition:
        raise AssertionError(message)


def same_outputs(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two outputs have the same length and equal elements (arrays compared by value)."""
    if len(a) != len(b):
        return False
    return all(np.array_equal(x, y) for x, y in zip(a, b))
