"""Shared helpers of the grainfn benchmark suite.

Timing is wall-clock `time.perf_counter`, best of R runs after one untimed
warm-up; the garbage collector stays enabled (as in a real input pipeline), with
a full collection before the first timed run and a young-generation one before
each run, so that one run's garbage is not billed to the next. Tables are
printed as Markdown so the same text goes to the terminal and into
`docs/performance.md`.

Used by `benchmarks.map_level`; later benchmark files (streams, the Grain-style
facade, workers) are meant to reuse `measure`, the formatters and `Report`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.metadata
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

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


# ---------------------------------------------------------------------------
# Tables and reports.


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown (GitHub) table, columns padded so it also reads well as plain text.

    The first column is left-aligned and the others right-aligned.
    """
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    for row in cells[1:]:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells for {len(headers)} headers")
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [":" + "-" * (widths[0] - 1)] + ["-" * (w - 1) + ":" for w in widths[1:]]
    return "\n".join([line(cells[0]), "| " + " | ".join(rule) + " |", *map(line, cells[1:])])


def environment() -> dict[str, str]:
    """The machine and the versions that matter for the numbers."""

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores ({usable} usable)",
        "os": platform.platform(terse=True),
        "python": sys.version.split()[0],
        "numpy": version("numpy"),
        "grain": version("grain"),
        "grainfn": version("grainfn"),
    }


def environment_lines() -> list[str]:
    """`environment()` as Markdown bullet lines."""
    return [f"- {key}: {value}" for key, value in environment().items()]


class Report:
    """Text printed as it is produced, and kept for an optional Markdown file.

    It opens with a heading and the environment the figures were measured in.
    """

    def __init__(self, title: str) -> None:
        self.lines: list[str] = []
        self.add(f"## {title}")
        self.add()
        for line in environment_lines():
            self.add(line)
        self.add()

    def add(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def write(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines).rstrip() + "\n")


def argument_parser(module: str, description: str) -> argparse.ArgumentParser:
    """The options every benchmark script takes: `--quick` and `--markdown PATH`.

    Args:
        module: The script's module, e.g. "benchmarks.map_level", for the usage line.
        description: One line saying what the script measures.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and fewer runs: a smoke run (< 60 s)"
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write the environment and tables to PATH"
    )
    return parser
