"""Stream benchmarks: grainfn's `fn.iterate` against Grain's IterDataset and a hand loop.

S1: map_level's B1 as a stream; B3: a shuffled, filtered range, then a stream-level `batch(32)`;
State: after an element, and resuming at 10**3 and 10**6. See docs/performance.md, "Streams".
"""

from __future__ import annotations

import dataclasses
import functools
import timeit
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

from benchmarks import harness as h
from benchmarks.map_level import BATCH, b1_pipeline, core_b1, hand_b1
from benchmarks.run import run_suite
from grainfn import fn

ELEMENTS = "grainfn fn.elements"


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    n: int = 200_000  # elements of S1 and B3
    grain_budget: float = 15.0  # seconds of timed runs per Grain case before repeats stop
    state_calls: int = 2000  # calls per timed repeat of a state operation


DEFAULT, QUICK = Config(), Config(n=20_000, grain_budget=5.0, state_calls=200)


def keep(x: int) -> bool:
    return x % 3 == 0


def add_draw(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def b3_stream(n: int) -> Any:
    """B3 in the core: a shuffled, filtered range, batched as a stream."""
    return fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))


def b3_pipeline(lib: Any, n: int) -> Any:
    """B3 before its stream-level batch, with `lib` (Grain or grainfn's facade)."""
    return lib.MapDataset.range(n).seed(2).shuffle().filter(keep)


def hand_b3(n: int) -> list[np.ndarray]:
    """A numpy permutation, the kept elements, an array per batch."""
    kept = [x for x in np.random.default_rng(2).permutation(n).tolist() if x % 3 == 0]
    return [np.array(kept[i : i + BATCH]) for i in range(0, len(kept), BATCH)]


def s1(c: Config) -> list[h.Row]:
    ds = core_b1(c.n)
    stream = fn.from_dataset(ds)
    cases = {
        h.GRAINFN: h.Case(lambda: list(fn.iterate(stream))),
        ELEMENTS: h.Case(lambda: list(fn.elements(ds))),
        **h.grain_cases(functools.partial(b1_pipeline, grain), c.n, None, budget=c.grain_budget),
        h.HAND: h.Case(lambda: hand_b1(c.n)),
    }
    t = h.measure(cases, c.timer)
    h.require_same("S1", h.results(t), (ELEMENTS, h.GRAIN, h.GRAIN_SYNC))
    detail = f"{c.n:,} elements; fn.iterate = fn.elements = Grain (both)"
    return [h.Row("S1", "= B1 via fn.iterate", h.per_item(t, 1), detail=detail)]


def b3(c: Config) -> list[h.Row]:
    stream, then = b3_stream(c.n), lambda ds: ds.batch(BATCH)
    cases = {
        h.GRAINFN: h.Case(lambda: list(fn.iterate(stream))),
        **h.grain_cases(
            functools.partial(b3_pipeline, grain), c.n, None, then, budget=c.grain_budget
        ),
        h.HAND: h.Case(lambda: hand_b3(c.n)),
    }
    t = h.measure(cases, c.timer)
    h.require_same("B3", h.results(t), (h.GRAIN, h.GRAIN_SYNC))
    detail = f"{c.n:,} elements; grainfn = Grain (both)"
    return [h.Row("B3", f"shuffle+filter+stream batch({BATCH})", h.per_item(t, 1), detail=detail)]


def state(c: Config) -> list[h.Row]:
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
        at = fn.IndexedState(position, fn.DatasetPosition(position))
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
    n = c.state_calls
    detail = f"range({length:_}), stream random_map, batch({BATCH}); best of 5 x {n} calls"
    rows: list[h.Row] = []
    for key, (a, b) in calls.items():  # the detail is the same for the three rows: said once
        figures = {h.GRAINFN: best_call(a, n), "Grain": best_call(b, n)}
        rows.append(h.Row(key, "", figures, unit="us", detail="" if rows else detail))
    return rows


def best_call(call: Callable[[], Any], calls: int) -> float:
    """The seconds per call of the best of 5 `timeit` repeats of `calls` calls."""
    return min(timeit.repeat(call, number=calls, repeat=5)) / calls


def steps(c: Config) -> list[h.Step]:
    rows = {"S1": s1, "B3": b3, "state": state}
    return [h.Step(key, functools.partial(row, c)) for key, row in rows.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    s1_row, b3_row = rows["S1"], rows["B3"]
    get_state = rows["get_state"].per_item[h.GRAINFN]
    resume = h.ratio(*(rows[f"resume at 10**{e}"].per_item[h.GRAINFN] for e in (6, 3)))
    return [
        h.Target.at_most("S1: fn.iterate within 1.2x of fn.elements", s1_row.over(ELEMENTS), 1.2),
        h.Target.at_least("S1: >= 10x Grain default", s1_row.speedup(h.GRAIN), 10),
        h.Target.at_least("B3: >= 3x Grain default", b3_row.speedup(h.GRAIN), 3),
        h.Target.at_least("B3: >= 3x Grain threads=0", b3_row.speedup(h.GRAIN_SYNC), 3),
        h.Target.below("get_state: microseconds", get_state, 1e-4, h.fmt_seconds),
        h.Target.below("resume: O(1) (at 10**6 / at 10**3 within 2x)", resume, 2),
    ]


if __name__ == "__main__":
    run_suite("streams", __doc__ or "", steps, targets, DEFAULT, QUICK)
