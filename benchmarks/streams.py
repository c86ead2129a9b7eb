"""Stream benchmarks: grainfn's `fn.iterate` against Google Grain's IterDataset and a hand loop.

Run from the project root:

    python -m benchmarks.streams [--quick] [--markdown PATH]

- S1: B1 of `benchmarks.map_level` (`range(200_000).seed(0).shuffle().map(x + 1)
  .batch(32)`) read as a stream with `fn.iterate`, against the same dataset read
  with `fn.elements` (the map-level figure) and against Grain.
- B3: `range(200_000).seed(2).shuffle().filter(x % 3 == 0)`, then a stream-level
  `batch(32)`, one epoch.
- State: the cost of reading the state after an element, and of resuming at
  position 10**3 and 10**6 (first element after restoring), for grainfn and Grain.

Times are best-of-R wall-clock, the implementations' runs interleaved (see
`benchmarks.common`).
"""

from __future__ import annotations

import dataclasses
import timeit
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

from benchmarks.common import (
    Case,
    fmt_micros,
    fmt_ratio,
    fmt_seconds,
    measure_all,
    ratio,
    require,
    same_outputs,
)
from benchmarks.map_level import hand_b1
from benchmarks.report import GRAIN, GRAIN_SYNC, GRAINFN, HAND, Row, Run, Targets, results_table
from grainfn import fn

BATCH = 32
ELEMENTS = "fn.elements"  # S1's key for the same dataset read with fn.elements
STATE_OPS = ("get_state", "resume at 10**3", "resume at 10**6")


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    n: int  # elements of S1 and B3
    grain_budget: float  # seconds of timed runs per Grain implementation before repeats stop
    state_calls: int  # calls per timed repeat of a state operation


DEFAULT = Config(n=200_000, grain_budget=15.0, state_calls=2000)
QUICK = Config(n=20_000, grain_budget=5.0, state_calls=200)


def grain_read(build: Callable[[], Any], threads: bool) -> Callable[[], list[Any]]:
    options = grain.ReadOptions() if threads else grain.ReadOptions(num_threads=0)
    return lambda: list(build().to_iter_dataset(options))


def s1(config: Config) -> Row:
    n, budget = config.n, config.grain_budget
    ds = fn.batch(BATCH, fn.map(lambda x: x + 1, fn.shuffle(fn.seed(0, fn.range(n)))))
    stream = fn.from_dataset(ds)

    def grain_ds() -> Any:
        return grain.MapDataset.range(n).seed(0).shuffle().map(lambda x: x + 1).batch(BATCH)

    timings = measure_all(
        [
            Case("S1 grainfn fn.iterate", lambda: list(fn.iterate(stream))),
            Case("S1 grainfn fn.elements", lambda: list(fn.elements(ds))),
            Case("S1 Grain default", grain_read(grain_ds, True), budget=budget),
            Case("S1 Grain threads=0", grain_read(grain_ds, False), budget=budget),
            Case("S1 hand loop", lambda: hand_b1(n)),
        ]
    )
    check_same(timings[0].result, timings[1].result, timings[2].result, timings[3].result)
    keys = (GRAINFN, ELEMENTS, GRAIN, GRAIN_SYNC, HAND)
    return Row(
        f"S1 = B1 via fn.iterate, {n:,} elements",
        {key: t.best for key, t in zip(keys, timings, strict=True)},
    )


def b3(config: Config) -> Row:
    n, budget = config.n, config.grain_budget
    keep = lambda x: x % 3 == 0  # noqa: E731
    stream = fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))

    def grain_read_b3(threads: bool) -> Callable[[], list[Any]]:
        options = grain.ReadOptions() if threads else grain.ReadOptions(num_threads=0)
        ds = grain.MapDataset.range(n).seed(2).shuffle().filter(keep)
        return lambda: list(ds.to_iter_dataset(options).batch(BATCH))

    timings = measure_all(
        [
            Case("B3 grainfn", lambda: list(fn.iterate(stream))),
            Case("B3 Grain default", grain_read_b3(True), budget=budget),
            Case("B3 Grain threads=0", grain_read_b3(False), budget=budget),
            Case("B3 hand loop", lambda: hand_b3(n)),
        ]
    )
    check_same(timings[0].result, timings[1].result, timings[2].result)
    keys = (GRAINFN, GRAIN, GRAIN_SYNC, HAND)
    return Row(
        f"B3 shuffle+filter, stream batch({BATCH}), {n:,} elements",
        {key: t.best for key, t in zip(keys, timings, strict=True)},
    )


def hand_b3(n: int) -> list[np.ndarray]:
    """B3 by hand: a numpy permutation, the kept elements, an array per batch."""
    kept = [x for x in np.random.default_rng(2).permutation(n).tolist() if x % 3 == 0]
    return [np.array(kept[i : i + BATCH]) for i in range(0, len(kept), BATCH)]


def state_costs(number: int) -> dict[str, float]:
    """Seconds per call of reading a state, and of resuming at a far position."""
    length = 2 * 10**6 + 1
    stream = fn.batch(BATCH, fn.random_map(add_draw, fn.from_dataset(fn.range(length)), seed=1))
    it = fn.iterate(stream)
    next(it)
    grain_ds = (
        grain.MapDataset.range(length)
        .to_iter_dataset(grain.ReadOptions(num_threads=0))
        .random_map(add_draw, seed=1)
        .batch(BATCH)
    )
    grain_it = iter(grain_ds)
    next(grain_it)
    grain_state = grain_it.get_state()

    def ours_at(position: int) -> Callable[[], Any]:
        state = fn.CountState(position, fn.DatasetPosition(position))
        return lambda: next(fn.iterate(stream, state))

    def grain_at(position: int) -> Callable[[], Any]:
        state = {**grain_state, "parent": {"next_index": position}, "index_for_rng": position}
        fresh = iter(grain_ds)

        def resume() -> Any:
            fresh.set_state(state)
            return next(fresh)

        return resume

    np.testing.assert_array_equal(ours_at(10**6)(), grain_at(10**6)())
    costs = {}
    for name, call in [
        ("grainfn get_state", lambda: it.state),
        ("Grain get_state", grain_it.get_state),
        ("grainfn resume at 10**3", ours_at(10**3)),
        ("grainfn resume at 10**6", ours_at(10**6)),
        ("Grain resume at 10**3", grain_at(10**3)),
        ("Grain resume at 10**6", grain_at(10**6)),
    ]:
        costs[name] = min(timeit.repeat(call, number=number, repeat=5)) / number
    return costs


def state_table(costs: dict[str, float]) -> str:
    """grainfn's and Grain's cost of each operation in `STATE_OPS`, and their ratio."""
    libraries = ["grainfn", "Grain"]
    rows = [
        Row(op, {lib: costs[f"{lib} {op}"] for lib in libraries}, unit="us") for op in STATE_OPS
    ]
    ratios = [("Grain / grainfn", Row.speedup, "Grain")]
    return results_table(rows, libraries, ratios, first="State operation")


def add_draw(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def check_same(ours: list[Any], *others: list[Any]) -> None:
    for other in others:
        require(same_outputs(ours, other), "grainfn's output differs from another implementation's")


def targets(s1_row: Row, b3_row: Row, costs: dict[str, float]) -> Targets:
    out = Targets()
    out.at_most("S1: fn.iterate within 1.2x of fn.elements", s1_row.over(ELEMENTS), 1.2)
    out.at_least("S1: >= 10x Grain default", s1_row.speedup(GRAIN), 10)
    out.at_least("B3: >= 3x Grain default", b3_row.speedup(GRAIN), 3)
    out.at_least("B3: >= 3x Grain threads=0", b3_row.speedup(GRAIN_SYNC), 3)
    get_state = costs["grainfn get_state"]
    out.add("get_state: microseconds", fmt_micros(get_state), get_state < 1e-4)
    resume_growth = ratio(costs["grainfn resume at 10**6"], costs["grainfn resume at 10**3"])
    out.add(
        "resume: O(1) (at 10**6 / at 10**3 within 2x)",
        fmt_ratio(resume_growth),
        resume_growth is not None and resume_growth < 2,
    )
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.streams", __doc__, "grainfn stream benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    s1_row = run.section("S1", lambda: s1(config))
    b3_row = run.section("B3", lambda: b3(config))
    costs = run.section("state", lambda: state_costs(config.state_calls))
    run.stop_clock()

    report = run.report
    ratios = [
        ("vs Grain default", Row.speedup, GRAIN),
        ("vs Grain threads=0", Row.speedup, GRAIN_SYNC),
        ("grainfn / hand loop", Row.over, HAND),
    ]
    report.add(results_table([s1_row, b3_row], [GRAINFN, GRAIN, GRAIN_SYNC, HAND], ratios))
    report.add()
    report.add(
        f"S1 through fn.iterate takes {fmt_ratio(s1_row.over(ELEMENTS))} the time of the same "
        f"dataset through fn.elements ({fmt_seconds(s1_row.per_item[ELEMENTS])})."
    )
    report.add()
    report.add(state_table(costs))
    report.add(
        "\nThe state benchmark reads `range(2_000_001)` through a stream random_map and "
        "batch(32); resuming means restoring the state and reading the first batch after it."
    )
    report.add()
    run.finish(targets(s1_row, b3_row, costs))


if __name__ == "__main__":
    main()
