"""Packing benchmarks: first-fit and best-fit packing in grainfn, Grain and a hand loop.

Run from the project root:

    python -m benchmarks.packing [--quick] [--markdown PATH]

Setup (untimed): 100,000 token sequences (10,000 with --quick), each a dict of
"inputs" and "targets", int32 arrays whose lengths are drawn uniformly from
1..512 with `np.random.default_rng(42)`, kept in a Python list.

- First-fit: `FirstFitPackIterDataset(MapDataset.source(data).to_iter_dataset(),
  length_struct={"inputs": 1024, "targets": 1024}, num_packing_bins=64)` (bins
  shuffled with seed 0), read to the end, for grainfn and for Grain (default
  read options, and `num_threads=0`). The hand loop is a plain Python/numpy
  first-fit over the same list: a scan of the bins per sequence, slice writes
  into preallocated block arrays, the rows in Grain's shuffled order.
- Best-fit: the same with `BestFitPackIterDataset` (no hand loop).

Every output is checked before timing: all packed elements of grainfn, Grain
and the hand loop are equal (dtype, shape, value). The timed runs only count
the packed elements, so no run keeps gigabytes of rows alive. Times are
best-of-R wall-clock, the implementations' runs interleaved (see
`benchmarks.common`); Grain is slow, so it runs once per case after a warm-up
on a small input.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import grainfn
from benchmarks.common import Case, measure_all, require
from benchmarks.report import (
    GRAIN,
    GRAIN_SYNC,
    GRAINFN,
    HAND,
    RatioColumn,
    Row,
    Run,
    Targets,
    results_table,
)
from grainfn._src.facade.packing import BestFitPackIterDataset, FirstFitPackIterDataset
from grainfn.testing import assert_elements_equal

LENGTH = 1024
BINS = 64
SEED = 0
FEATURES = ("inputs", "targets")
COLUMNS = [GRAINFN, GRAIN, GRAIN_SYNC, HAND]
RATIOS: list[RatioColumn] = [
    ("speed-up vs Grain default", Row.speedup, GRAIN),
    ("speed-up vs Grain threads=0", Row.speedup, GRAIN_SYNC),
    ("grainfn / hand loop", Row.over, HAND),
]


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    sequences: int
    repeats: int
    budget: float  # seconds of timed runs per implementation before repeats stop


DEFAULT = Config(sequences=100_000, repeats=5, budget=12.0)
QUICK = Config(sequences=10_000, repeats=3, budget=3.0)


def make_data(count: int) -> list[dict[str, np.ndarray]]:
    """`count` sequences with "inputs" and "targets" of 1..512 int32 tokens each."""
    rng = np.random.default_rng(42)
    lengths = rng.integers(1, 513, size=(count, 2)).tolist()
    return [
        {
            "inputs": rng.integers(1, 32_000, size=a, dtype=np.int32),
            "targets": rng.integers(1, 32_000, size=b, dtype=np.int32),
        }
        for a, b in lengths
    ]


def packed(lib: Any, strategy: str, data: list[Any], threads: bool = True) -> Any:
    """The packing dataset of `lib` (grainfn or Grain) over `data`."""
    if lib is grainfn:
        cls = FirstFitPackIterDataset if strategy == "first_fit" else BestFitPackIterDataset
        parent = grainfn.MapDataset.source(data).to_iter_dataset()
    else:
        experimental = lib.experimental
        cls = (
            experimental.FirstFitPackIterDataset
            if strategy == "first_fit"
            else experimental.BestFitPackIterDataset
        )
        options = lib.ReadOptions() if threads else lib.ReadOptions(num_threads=0)
        parent = lib.MapDataset.source(data).to_iter_dataset(options)
    return cls(
        parent,
        length_struct={name: LENGTH for name in FEATURES},
        num_packing_bins=BINS,
        seed=SEED,
    )


def hand_first_fit(data: list[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
    """First-fit by hand: per sequence a scan of the bins and slice writes into block arrays."""
    counting = np.arange(LENGTH, dtype=np.int32)
    index, emitted = 0, 0
    while index < len(data):
        blocks = {
            name: np.zeros((BINS, LENGTH), np.int32)
            for feature in FEATURES
            for name in (feature, f"{feature}_positions", f"{feature}_segment_ids")
        }
        inputs, targets = blocks["inputs"], blocks["targets"]
        inputs_pos, targets_pos = blocks["inputs_positions"], blocks["targets_positions"]
        inputs_seg, targets_seg = blocks["inputs_segment_ids"], blocks["targets_segment_ids"]
        used_inputs, used_targets, counts = [0] * BINS, [0] * BINS, [0] * BINS
        while index < len(data):
            element = data[index]
            x, y = element["inputs"], element["targets"]
            nx, ny = len(x), len(y)
            for b in range(BINS):
                if used_inputs[b] + nx <= LENGTH and used_targets[b] + ny <= LENGTH:
                    break
            else:
                break  # fits no bin: the block is complete
            counts[b] += 1
            i, j = used_inputs[b], used_targets[b]
            inputs[b, i : i + nx] = x
            inputs_pos[b, i : i + nx] = counting[:nx]
            inputs_seg[b, i : i + nx] = counts[b]
            targets[b, j : j + ny] = y
            targets_pos[b, j : j + ny] = counting[:ny]
            targets_seg[b, j : j + ny] = counts[b]
            used_inputs[b], used_targets[b] = i + nx, j + ny
            index += 1
        rows = sum(1 for count in counts if count)
        order = np.random.default_rng(SEED + emitted).permuted(np.arange(rows)).tolist()
        emitted += rows
        keys = sorted(blocks)
        for row in order:
            yield {key: blocks[key][row] for key in keys}


def count(iterable: Any) -> int:
    """Reads `iterable` to the end and returns how many elements it had."""
    return sum(1 for _ in iterable)


def check_equal(outputs: dict[str, Callable[[], Any]]) -> int:
    """Asserts that the implementations yield equal elements, in lockstep; returns how many."""
    names = list(outputs)
    iterators = [iter(make()) for make in outputs.values()]
    total = 0
    for total, elements in enumerate(itertools.zip_longest(*iterators), 1):
        require(elements[0] is not None, f"{names[0]} yields fewer elements than another")
        for name, element in zip(names[1:], elements[1:]):
            require(element is not None, f"{name} yields fewer elements than {names[0]}")
            assert_elements_equal(element, elements[0], f"{name} element {total - 1}")
    return total


def bench(config: Config, strategy: str, data: list[Any], small: list[Any]) -> Row:
    import grain

    n = len(data)
    title = "First-fit" if strategy == "first_fit" else "Best-fit"
    print(f"{title}: {n:_} sequences into {BINS} bins of {LENGTH} (inputs, targets)", flush=True)
    implementations: dict[str, Callable[[], Any]] = {
        GRAINFN: lambda: packed(grainfn, strategy, data),
        GRAIN: lambda: packed(grain, strategy, data),
        GRAIN_SYNC: lambda: packed(grain, strategy, data, threads=False),
    }
    if strategy == "first_fit":
        implementations[HAND] = lambda: hand_first_fit(data)
    # Grain with and without threads runs the same packer: check against the faster one.
    rows = check_equal({key: make for key, make in implementations.items() if key != GRAIN})
    print(f"  outputs checked: {rows:_} equal packed elements from each", flush=True)

    def case(key: str, make: Callable[[], Any]) -> Case:
        slow = key in (GRAIN, GRAIN_SYNC)
        warmup: Any = True
        if slow:  # one untimed run on a small input instead of a full one
            lib_threads = key == GRAIN
            warmup = lambda: count(packed(grain, strategy, small, threads=lib_threads))  # noqa: E731
        return Case(f"{title} {key}", lambda: count(make()), warmup=warmup)

    timings = measure_all(
        [case(key, make) for key, make in implementations.items()],
        repeats=config.repeats,
        budget=config.budget,
    )
    for timing in timings:
        require(timing.result == rows, f"{timing.label} read {timing.result} elements, not {rows}")
    return Row(
        f"{title}, {n:,} sequences, {BINS} bins of {LENGTH}",
        {key: t.best / n for key, t in zip(implementations, timings)},
        items=n,
        check="= Grain" + (", = hand loop" if strategy == "first_fit" else ""),
    )


def targets(rows: dict[str, Row]) -> Targets:
    out = Targets()
    out.at_least("First-fit: grainfn >= 1.0x Grain default", rows["first_fit"].speedup(GRAIN), 1.0)
    out.at_least("Best-fit: grainfn >= 1.0x Grain default", rows["best_fit"].speedup(GRAIN), 1.0)
    out.at_most(
        "First-fit: grainfn within 1.5x of the hand loop", rows["first_fit"].over(HAND), 1.5
    )
    out.check("Packed elements = Grain's (checked before timing)", True)
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.packing", __doc__, "grainfn packing benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    data = make_data(config.sequences)
    small = data[:2_000]
    rows = {
        strategy: run.section(strategy, functools.partial(bench, config, strategy, data, small))
        for strategy in ("first_fit", "best_fit")
    }
    run.stop_clock()

    report = run.report
    report.add(
        f"{config.sequences:,} sequences of inputs and targets, each 1..512 int32 tokens "
        f"(uniform, seed 42), packed into {BINS} bins of {LENGTH} tokens per feature, bins "
        f"shuffled with seed {SEED}; times are for all sequences."
    )
    report.add()
    report.add(results_table(list(rows.values()), COLUMNS, RATIOS, check="outputs checked"))
    report.add()
    notes = [
        "Speed-ups are Grain's time divided by grainfn's; 'grainfn / hand loop' is a time "
        "ratio, below 1 where grainfn is faster. grainfn is the Grain-style facade "
        "(`FirstFitPackIterDataset` over `MapDataset.source(data).to_iter_dataset()`); the "
        "hand loop packs the same list with a bin scan and slice writes per sequence.",
        f"Best of the timed runs: each implementation runs up to {config.repeats} times, "
        f"starting no new run past {config.budget:g} s; Grain usually runs once.",
    ]
    report.add_notes(notes)
    run.finish(targets(rows))


if __name__ == "__main__":
    main()
