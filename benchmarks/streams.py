"""Stream benchmarks: grainfn's `fn.iterate` against Grain's IterDataset and a hand loop.

- S1: B1 of `benchmarks.map_level` (`range(200_000).seed(0).shuffle().map(x + 1)
  .batch(32)`) read as a stream with `fn.iterate`, against the same dataset read
  with `fn.elements` (the map-level figure), Grain and the hand loop.
- B3: `range(200_000).seed(2).shuffle().filter(x % 3 == 0)`, then a stream-level
  `batch(32)`, one epoch.
- State: reading the state after an element, and resuming at position 10**3 and
  10**6 (restoring the state and reading the first batch after it), for grainfn
  and Grain: the best of 5 `timeit` repeats of N calls.

Grain is warmed up on the full pipeline here, within a time budget of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import timeit
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

from benchmarks.harness import (
    GRAIN,
    GRAIN_SYNC,
    GRAINFN,
    HAND,
    Case,
    Row,
    Target,
    Timer,
    fmt_ratio,
    fmt_seconds,
    grain_cases,
    measure,
    per_item,
    ratio,
    require,
    same_outputs,
)
from benchmarks.map_level import BATCH, b1_pipeline, core_b1, hand_b1
from benchmarks.run import Step, run_suite
from grainfn import fn

ELEMENTS = "grainfn fn.elements"


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing (`QUICK` shrinks everything for a smoke run)."""

    n: int  # elements of S1 and B3
    grain_budget: float  # seconds of timed runs per Grain implementation before repeats stop
    state_calls: int  # calls per timed repeat of a state operation


DEFAULT = Config(n=200_000, grain_budget=15.0, state_calls=2000)
QUICK = Config(n=20_000, grain_budget=5.0, state_calls=200)


def keep(x: int) -> bool:
    return x % 3 == 0


def add_draw(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def hand_b3(n: int) -> list[np.ndarray]:
    """A numpy permutation, the kept elements, an array per batch."""
    kept = [x for x in np.random.default_rng(2).permutation(n).tolist() if x % 3 == 0]
    return [np.array(kept[i : i + BATCH]) for i in range(0, len(kept), BATCH)]


def s1(c: Config) -> list[Row]:
    ds = core_b1(c.n)
    stream = fn.from_dataset(ds)
    cases = {
        GRAINFN: Case(lambda: list(fn.iterate(stream))),
        ELEMENTS: Case(lambda: list(fn.elements(ds))),
        **grain_cases(functools.partial(b1_pipeline, grain), c.n, None, budget=c.grain_budget),
        HAND: Case(lambda: hand_b1(c.n)),
    }
    t = measure(cases, Timer())
    for label in (ELEMENTS, GRAIN, GRAIN_SYNC):
        require(same_outputs(t[GRAINFN].result, t[label].result), f"S1: grainfn != {label}")
    detail = f"{c.n:,} elements; fn.iterate = fn.elements = Grain (both)"
    return [Row("S1", "= B1 via fn.iterate", per_item(t, 1), detail=detail)]


def b3(c: Config) -> list[Row]:
    n = c.n
    stream = fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))

    def pipeline(size: int) -> Any:
        return grain.MapDataset.range(size).seed(2).shuffle().filter(keep)

    cases = {
        GRAINFN: Case(lambda: list(fn.iterate(stream))),
        **grain_cases(pipeline, n, None, lambda ds: ds.batch(BATCH), budget=c.grain_budget),
        HAND: Case(lambda: hand_b3(n)),
    }
    t = measure(cases, Timer())
    for label in (GRAIN, GRAIN_SYNC):
        require(same_outputs(t[GRAINFN].result, t[label].result), f"B3: grainfn != {label}")
    detail = f"{n:,} elements; grainfn = Grain (both)"
    return [Row("B3", f"shuffle+filter+stream batch({BATCH})", per_item(t, 1), detail=detail)]


def state(c: Config) -> list[Row]:
    """Seconds per call of reading a state, and of resuming at a far position."""
    length = 2 * 10**6 + 1
    stream = fn.batch(BATCH, fn.random_map(add_draw, fn.from_dataset(fn.range(length)), seed=1))
    ours = fn.iterate(stream)
    next(ours)
    theirs_ds = grain.MapDataset.range(length).to_iter_dataset(grain.ReadOptions(num_threads=0))
    theirs_ds = theirs_ds.random_map(add_draw, seed=1).batch(BATCH)
    theirs = iter(theirs_ds)
    next(theirs)
    grain_state = theirs.get_state()

    def ours_at(position: int) -> Callable[[], Any]:
        at = fn.CountState(position, fn.DatasetPosition(position))
        return lambda: next(fn.iterate(stream, at))

    def grain_at(position: int) -> Callable[[], Any]:
        at = {**grain_state, "parent": {"next_index": position}, "index_for_rng": position}
        fresh = iter(theirs_ds)

        def resume() -> Any:
            fresh.set_state(at)
            return next(fresh)

        return resume

    np.testing.assert_array_equal(ours_at(10**6)(), grain_at(10**6)())
    calls = {
        "get_state": (lambda: ours.state, theirs.get_state),
        "resume at 10**3": (ours_at(10**3), grain_at(10**3)),
        "resume at 10**6": (ours_at(10**6), grain_at(10**6)),
    }
    detail = (
        f"range({length:_}), stream random_map, batch({BATCH}); best of 5 x {c.state_calls} calls"
    )
    figures = {
        key: {GRAINFN: best_call(a, c), "Grain": best_call(b, c)} for key, (a, b) in calls.items()
    }
    details = {"get_state": detail}  # the same for the three rows: said once
    return [Row(key, "", figures[key], unit="us", detail=details.get(key, "")) for key in calls]


def best_call(call: Callable[[], Any], c: Config) -> float:
    """The seconds per call of the best of 5 `timeit` repeats of `c.state_calls` calls."""
    return min(timeit.repeat(call, number=c.state_calls, repeat=5)) / c.state_calls


def steps(quick: bool) -> list[Step]:
    c = QUICK if quick else DEFAULT
    return [
        Step(name, functools.partial(row, c))
        for name, row in (("S1", s1), ("B3", b3), ("state", state))
    ]


def targets(rows: dict[str, Row]) -> list[Target]:
    s1_row, b3_row = rows["S1"], rows["B3"]
    get_state = rows["get_state"].per_item[GRAINFN]
    resume = ratio(
        rows["resume at 10**6"].per_item[GRAINFN], rows["resume at 10**3"].per_item[GRAINFN]
    )
    return [
        Target.at_most("S1: fn.iterate within 1.2x of fn.elements", s1_row.over(ELEMENTS), 1.2),
        Target.at_least("S1: >= 10x Grain default", s1_row.speedup(GRAIN), 10),
        Target.at_least("B3: >= 3x Grain default", b3_row.speedup(GRAIN), 3),
        Target.at_least("B3: >= 3x Grain threads=0", b3_row.speedup(GRAIN_SYNC), 3),
        Target(
            "get_state: microseconds",
            fmt_seconds(get_state),
            get_state is not None and get_state < 1e-4,
        ),
        Target(
            "resume: O(1) (at 10**6 / at 10**3 within 2x)",
            fmt_ratio(resume),
            resume is not None and resume < 2,
        ),
    ]


if __name__ == "__main__":
    run_suite("streams", __doc__ or "", steps, targets)
