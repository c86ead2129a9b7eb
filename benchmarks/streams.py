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

import timeit
from collections.abc import Callable
from typing import Any

import grain
import numpy as np

from benchmarks.common import (
    Case,
    CpuMonitor,
    Report,
    argument_parser,
    fmt_micros,
    fmt_ratio,
    fmt_seconds,
    markdown_table,
    measure_all,
    ratio,
)
from grainfn import fn

BATCH = 32


def grain_read(build: Callable[[], Any], threads: bool) -> Callable[[], list[Any]]:
    options = grain.ReadOptions() if threads else grain.ReadOptions(num_threads=0)
    return lambda: list(build().to_iter_dataset(options))


def s1(n: int, budget: float) -> tuple[list[Any], dict[str, float]]:
    ds = fn.batch(BATCH, fn.map(lambda x: x + 1, fn.shuffle(fn.seed(0, fn.range(n)))))
    stream = fn.from_dataset(ds)

    def grain_ds() -> Any:
        return grain.MapDataset.range(n).seed(0).shuffle().map(lambda x: x + 1).batch(BATCH)

    def hand() -> list[np.ndarray]:
        order = np.random.default_rng(0).permutation(n).tolist()
        return [np.array([x + 1 for x in order[i : i + BATCH]]) for i in range(0, n, BATCH)]

    timings = measure_all(
        [
            Case("S1 grainfn fn.iterate", lambda: list(fn.iterate(stream))),
            Case("S1 grainfn fn.elements", lambda: list(fn.elements(ds))),
            Case("S1 Grain default", grain_read(grain_ds, True), budget=budget),
            Case("S1 Grain threads=0", grain_read(grain_ds, False), budget=budget),
            Case("S1 hand loop", hand),
        ]
    )
    check_same(timings[0].result, timings[1].result, timings[2].result, timings[3].result)
    return timings, {t.label: t.best for t in timings}


def b3(n: int, budget: float) -> tuple[list[Any], dict[str, float]]:
    keep = lambda x: x % 3 == 0  # noqa: E731
    stream = fn.batch(BATCH, fn.from_dataset(fn.filter(keep, fn.shuffle(fn.seed(2, fn.range(n))))))

    def grain_read_b3(threads: bool) -> Callable[[], list[Any]]:
        options = grain.ReadOptions() if threads else grain.ReadOptions(num_threads=0)
        ds = grain.MapDataset.range(n).seed(2).shuffle().filter(keep)
        return lambda: list(ds.to_iter_dataset(options).batch(BATCH))

    def hand() -> list[np.ndarray]:
        kept = [x for x in np.random.default_rng(2).permutation(n).tolist() if x % 3 == 0]
        return [np.array(kept[i : i + BATCH]) for i in range(0, len(kept), BATCH)]

    timings = measure_all(
        [
            Case("B3 grainfn", lambda: list(fn.iterate(stream))),
            Case("B3 Grain default", grain_read_b3(True), budget=budget),
            Case("B3 Grain threads=0", grain_read_b3(False), budget=budget),
            Case("B3 hand loop", hand),
        ]
    )
    check_same(timings[0].result, timings[1].result, timings[2].result)
    return timings, {t.label: t.best for t in timings}


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


def add_draw(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def check_same(ours: list[Any], *others: list[Any]) -> None:
    for other in others:
        if len(other) != len(ours) or not all(
            np.array_equal(a, b) for a, b in zip(ours, other, strict=True)
        ):
            raise AssertionError("grainfn's output differs from another implementation's")


def main(argv: list[str] | None = None) -> None:
    args = argument_parser("benchmarks.streams", "grainfn streams against Grain").parse_args(argv)
    n = 20_000 if args.quick else 200_000
    budget = 5.0 if args.quick else 15.0
    monitor = CpuMonitor().start()
    report = Report("grainfn stream benchmarks")

    _, s1_times = s1(n, budget)
    _, b3_times = b3(n, budget)
    costs = state_costs(200 if args.quick else 2000)

    headers = [
        "Benchmark",
        "grainfn",
        "Grain default",
        "Grain threads=0",
        "hand loop",
        "vs Grain default",
        "vs Grain threads=0",
        "grainfn / hand loop",
    ]
    rows = []
    for name, times, prefix in (
        (f"S1 = B1 via fn.iterate, {n:,} elements", s1_times, "S1"),
        (f"B3 shuffle+filter, stream batch({BATCH}), {n:,} elements", b3_times, "B3"),
    ):
        ours = times[f"{prefix} grainfn fn.iterate" if prefix == "S1" else f"{prefix} grainfn"]
        rows.append(
            [
                name,
                fmt_seconds(ours),
                fmt_seconds(times[f"{prefix} Grain default"]),
                fmt_seconds(times[f"{prefix} Grain threads=0"]),
                fmt_seconds(times[f"{prefix} hand loop"]),
                fmt_ratio(ratio(times[f"{prefix} Grain default"], ours)),
                fmt_ratio(ratio(times[f"{prefix} Grain threads=0"], ours)),
                fmt_ratio(ratio(ours, times[f"{prefix} hand loop"])),
            ]
        )
    report.add(markdown_table(headers, rows))
    report.add()
    stream_over_map = ratio(s1_times["S1 grainfn fn.iterate"], s1_times["S1 grainfn fn.elements"])
    report.add(
        f"S1 through fn.iterate takes {fmt_ratio(stream_over_map)} the time of the same dataset "
        f"through fn.elements ({fmt_seconds(s1_times['S1 grainfn fn.elements'])})."
    )
    report.add()
    report.add(
        markdown_table(
            ["State operation", "grainfn", "Grain", "Grain / grainfn"],
            [
                [
                    op,
                    fmt_micros(costs[f"grainfn {op}"]),
                    fmt_micros(costs[f"Grain {op}"]),
                    fmt_ratio(ratio(costs[f"Grain {op}"], costs[f"grainfn {op}"])),
                ]
                for op in ("get_state", "resume at 10**3", "resume at 10**6")
            ],
        )
    )
    report.add(
        "\nThe state benchmark reads `range(2_000_001)` through a stream random_map and "
        "batch(32); resuming means restoring the state and reading the first batch after it."
    )
    report.add()
    resume_growth = ratio(costs["grainfn resume at 10**6"], costs["grainfn resume at 10**3"])
    targets = [
        (
            "S1: fn.iterate within 1.2x of fn.elements",
            fmt_ratio(stream_over_map),
            stream_over_map is not None and stream_over_map <= 1.2,
        ),
        (
            "S1: >= 10x Grain default",
            fmt_ratio(ratio(s1_times["S1 Grain default"], s1_times["S1 grainfn fn.iterate"])),
            s1_times["S1 Grain default"] >= 10 * s1_times["S1 grainfn fn.iterate"],
        ),
        (
            "B3: >= 3x Grain default",
            fmt_ratio(ratio(b3_times["B3 Grain default"], b3_times["B3 grainfn"])),
            b3_times["B3 Grain default"] >= 3 * b3_times["B3 grainfn"],
        ),
        (
            "B3: >= 3x Grain threads=0",
            fmt_ratio(ratio(b3_times["B3 Grain threads=0"], b3_times["B3 grainfn"])),
            b3_times["B3 Grain threads=0"] >= 3 * b3_times["B3 grainfn"],
        ),
        (
            "get_state: microseconds",
            fmt_micros(costs["grainfn get_state"]),
            costs["grainfn get_state"] < 1e-4,
        ),
        (
            "resume: O(1) (at 10**6 / at 10**3 within 2x)",
            fmt_ratio(resume_growth),
            resume_growth is not None and resume_growth < 2,
        ),
    ]
    report.add(
        markdown_table(
            ["Target", "Measured", "Status"],
            [[t, m, "met" if ok else "NOT met"] for t, m, ok in targets],
        )
    )
    other = monitor.other_cpu_seconds()
    if other is not None:
        report.add(
            f"\nOther processes used {other[0]:.0f} CPU-seconds during the {other[1]:.0f} s run."
        )
    if args.markdown:
        report.write(args.markdown)


if __name__ == "__main__":
    main()
