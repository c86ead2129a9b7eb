"""The benchmark harness, the measuring side: a suite's shape, timing, rows and targets.

A suite (`benchmarks/NAME.py`) imports this module as `h`: its `Config` subclasses `h.Config`
(`DEFAULT` a full run, `QUICK` a smoke run), its `steps(c)` are `h.Step`s measuring `h.Row`s, its
`targets(rows)` judges `h.Target`s; it ends in `run_suite(...)`. `measure`: best of R wall-clock
runs after a warm-up, interleaved in bursts, the collector on (collected before each run).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

GRAINFN, GRAIN, GRAIN_SYNC, HAND = "grainfn", "Grain default", "Grain threads=0", "hand loop"
"""The implementations most rows compare: keys of `Row.per_item`, and column headers."""
MISSING, SAMPLED = "n/a", "†"


def fmt_seconds(seconds: float | None) -> str:
    """A duration with 3 significant digits: '1.23 s', '45.6 ms', '789 µs'."""
    if seconds is None or math.isnan(seconds):
        return MISSING
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def fmt_rate(per_second: float | None, unit: str = "/s") -> str:
    """A rate with an SI prefix: '1.5 M/s', '82.4 kB/s'."""
    if per_second is None or math.isnan(per_second):
        return MISSING
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= factor:
            return f"{per_second / factor:.3g} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


def fmt_ratio(value: float | None) -> str:
    """A ratio: '12.3x', '0.85x', '159x'."""
    if value is None or math.isnan(value):
        return MISSING
    return f"{value:.0f}x" if value >= 100 else f"{value:.3g}x"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """`numerator / denominator`, or None if either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def difference(a: float | None, b: float | None) -> float | None:
    """`a - b`, or None if either is missing."""
    return None if a is None or b is None else a - b


def require(condition: bool, message: str) -> None:
    """Stops the benchmark with `message` if an output check failed."""
    if not condition:
        raise AssertionError(message)


def same_outputs(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two outputs have the same length and equal elements (arrays by value)."""
    import numpy as np

    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def require_same(what: str, outputs: Mapping[str, Any], labels: Sequence[str]) -> None:
    """Stops the benchmark unless the outputs of `labels` are grainfn's (`same_outputs`)."""
    for label in labels:
        require(same_outputs(outputs[GRAINFN], outputs[label]), f"{what}: grainfn != {label}")


# Timing, and the shape of a suite.
@dataclasses.dataclass(frozen=True)
class Timer:
    """How long `measure` times an implementation: `repeats` runs totalling `min_time` s, at most
    `max_repeats` or `budget` s (one run at least), in bursts of `burst` s (one run at least)."""

    repeats: int = 5
    min_time: float = 0.0
    max_repeats: int = 100
    budget: float = 15.0
    burst: float = 1.0


@dataclasses.dataclass(frozen=True)
class Config:
    """The base of a suite's `Config`: its sizes default to a full run's (the suite's `DEFAULT`)."""

    timer: Timer = Timer()


C = TypeVar("C", bound=Config)


@dataclasses.dataclass(frozen=True)
class Step:
    """One measurement of a suite, giving one or more rows."""

    name: str
    measure: Callable[[], list[Row]]


@dataclasses.dataclass(frozen=True)
class Case:
    """One implementation to time; `repeats`, `min_time` and `budget` override the `Timer`'s."""

    run: Callable[[], Any]  # the work; the result of its last timed run is kept
    warmup: bool | Callable[[], Any] = True  # one untimed run() first, or this (cheaper) instead
    setup: Callable[[], Any] | None = None  # called untimed before the warm-up and every run
    repeats: int | None = None
    min_time: float | None = None
    budget: float | None = None


Cases = dict[str, Case]  # implementations of the same work to time together, by label
Figures = dict[str, float | None]  # seconds per item of each implementation (`Row.per_item`)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Every timed run of one implementation, in seconds, and its last run's result."""

    runs: tuple[float, ...]
    result: Any = dataclasses.field(repr=False, default=None)

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def measure(cases: Mapping[str, Case], timer: Timer) -> dict[str, Timing]:
    """Best-of-R wall times of implementations of the same work: all warmed up, then the unfinished
    ones take turns, running back to back for a burst (all see the same machine)."""
    for case in cases.values():
        if case.setup is not None:
            case.setup()
        if case.warmup is True:
            case.run()
        elif callable(case.warmup):
            case.warmup()
    runs: dict[str, list[float]] = {label: [] for label in cases}
    last: dict[str, Any] = dict.fromkeys(cases)
    gc.collect()
    active = list(cases)
    while active:
        for label in list(active):
            case, done = cases[label], runs[label]
            limits = (
                timer.repeats if case.repeats is None else case.repeats,
                timer.min_time if case.min_time is None else case.min_time,
                timer.max_repeats,
                timer.budget if case.budget is None else case.budget,
            )
            burst_start = time.perf_counter()
            while wants_more(done, *limits):
                last[label] = None  # drop the previous result before the next run allocates
                if case.setup is not None:
                    case.setup()
                gc.collect(0)
                start = time.perf_counter()
                last[label] = case.run()
                done.append(time.perf_counter() - start)
                if time.perf_counter() - burst_start >= timer.burst:
                    break
            if not wants_more(done, *limits):
                active.remove(label)
    return {label: Timing(tuple(runs[label]), last[label]) for label in cases}


def wants_more(runs: list[float], repeats: int, min_time: float, most: int, budget: float) -> bool:
    if not runs:
        return True
    total = sum(runs)
    if len(runs) >= max(1, most) or total + runs[-1] > budget:
        return False
    return len(runs) < repeats or total < min_time


def per_item(timings: Mapping[str, Timing], items: int) -> Figures:
    """The best run of each implementation, divided by `items`."""
    return {label: timing.best / items for label, timing in timings.items()}


def results(timings: Mapping[str, Timing]) -> dict[str, Any]:
    """The result of each implementation's last run."""
    return {label: timing.result for label, timing in timings.items()}


def reader(iterable: Iterable[Any]) -> Callable[[], list[Any]]:
    """A run reading `iterable` to the end: `list(iterable)`, the list its result."""
    return functools.partial(list, iterable)


def grain_cases(
    build: Callable[[int], Any], n: int, warmup_n: int | None, then: Any = None, **case: Any
) -> Cases:
    """Grain default and threads=0 reading `then(build(n).to_iter_dataset(options))` to the end,
    warmed up on `build(warmup_n)` (the full pipeline if None); `case`: more `Case` fields."""
    import grain  # here, not at the top: workers spawned by a suite re-import the harness

    cases = {}
    for key, options in (
        (GRAIN, grain.ReadOptions()),
        (GRAIN_SYNC, grain.ReadOptions(num_threads=0)),
    ):
        full, small = (build(size).to_iter_dataset(options) for size in (n, warmup_n or n))
        if then is not None:
            full, small = then(full), then(small)
        cases[key] = Case(reader(full), reader(small), **case)
    return cases


# Rows and targets.
@dataclasses.dataclass(frozen=True)
class Row:
    """One benchmark's result: seconds per item of each implementation of the same work."""

    key: str  # short, unique in its suite, what targets start with ("B1")
    title: str  # what is measured, briefly; the row's name is `key title`
    per_item: Mapping[str, float | None]  # seconds per item by implementation (GRAINFN, HAND...)
    items: int = 1  # the number of items of the work
    unit: str = "s"  # "s" (all items), "us" (per item), "rate" (per second), "x" (not a time)
    _: dataclasses.KW_ONLY
    subject: str = GRAINFN  # the implementation the ratios are about
    detail: str = ""  # sizes, checks, what else to know, for the Markdown report
    sampled: tuple[str, ...] = ()  # implementations measured on a sample, marked `SAMPLED`
    checks: Mapping[str, bool] = dataclasses.field(default_factory=dict)  # reported, not raised

    @property
    def name(self) -> str:
        return f"{self.key} {self.title}".strip()

    def cell(self, key: str) -> str:
        """Implementation `key`'s figure as the tables show it."""
        value = self.per_item.get(key)
        if value is None:
            return MISSING
        if self.unit == "rate":
            text = fmt_rate(1 / value, " idx/s")
        elif self.unit == "x":
            text = fmt_ratio(value)
        else:
            text = fmt_seconds(value * self.items if self.unit == "s" else value)
        return text + (SAMPLED if key in self.sampled else "")

    def speedup(self, key: str) -> float | None:
        """Implementation `key`'s time divided by the subject's (above 1: the subject is faster)."""
        return self.ratio(key, self.subject)

    def over(self, key: str) -> float | None:
        """The subject's time divided by implementation `key`'s (below 1: the subject is faster)."""
        return self.ratio(self.subject, key)

    def ratio(self, numerator: str, denominator: str) -> float | None:
        """Implementation `numerator`'s figure divided by `denominator`'s, where both are known."""
        return ratio(self.per_item.get(numerator), self.per_item.get(denominator))

    def grain_speedup(self) -> float | None:
        """Grain default's time (else the first Grain figure's) divided by the subject's."""
        keys = [k for k, v in self.per_item.items() if k.startswith("Grain") and v is not None]
        return self.speedup(GRAIN if GRAIN in keys else next(iter(keys), GRAIN))


Fmt = Callable[[float | None], str]


@dataclasses.dataclass(frozen=True)
class Target:
    """A performance target: its text ("B1: >= 10x Grain default"), the value, whether met."""

    text: str
    measured: str
    met: bool

    @staticmethod
    def at_least(text: str, value: float | None, limit: float, fmt: Fmt = fmt_ratio) -> Target:
        """Met if `value` is known and `value >= limit`."""
        return Target(text, fmt(value), value is not None and value >= limit)

    @staticmethod
    def at_most(text: str, value: float | None, limit: float, fmt: Fmt = fmt_ratio) -> Target:
        """Met if `value` is known and `value <= limit`."""
        return Target(text, fmt(value), value is not None and value <= limit)

    @staticmethod
    def below(text: str, value: float | None, limit: float, fmt: Fmt = fmt_ratio) -> Target:
        """Met if `value` is known and `value < limit`."""
        return Target(text, fmt(value), value is not None and value < limit)

    @staticmethod
    def check(text: str, ok: bool) -> Target:
        """A yes / no check."""
        return Target(text, "yes" if ok else "no", ok)

    @staticmethod
    def checks(template: str, checks: Mapping[str, bool]) -> list[Target]:
        """A check per item of `checks`, its text `template` with "{}" replaced by the name."""
        return [Target.check(template.format(name), ok) for name, ok in checks.items()]

    def is_about(self, row: Row) -> bool:
        """Whether the text up to ': ' and the row's key are the same, or one starts the other
        ("P1" is about "P1 2 workers"; "State taken with 2 workers" about "State")."""
        prefix, key = self.text.split(": ", 1)[0], row.key
        return prefix == key or prefix.startswith(key + " ") or key.startswith(prefix + " ")


def status(row: Row, targets: Sequence[Target]) -> str:
    """'met', 'NOT met', 'k/n met', or '' for a row no target is about."""
    mine = [t.met for t in targets if t.is_about(row)]
    if not mine:
        return ""
    return "met" if all(mine) else "NOT met" if not any(mine) else f"{sum(mine)}/{len(mine)} met"
