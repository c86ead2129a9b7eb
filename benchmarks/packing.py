"""Packing benchmarks: first-fit and best-fit packing in grainfn, Grain and a hand loop.

100,000 sequences (10,000 with --quick) of 1 to 512 int32 tokens in 64 bins of 1,024: First-fit
(also a hand loop) and Best-fit, checked equal before timing. See docs/performance.md, "Packing".
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks.run import run_suite
from grainfn.testing import assert_elements_equal

LENGTH, BINS, SEED = 1024, 64, 0
FEATURES = ("inputs", "targets")
PACKERS = {"First-fit": "FirstFitPackIterDataset", "Best-fit": "BestFitPackIterDataset"}


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    sequences: int = 100_000


DEFAULT = Config(h.Timer(repeats=5, budget=12.0))
QUICK = Config(h.Timer(repeats=3, budget=3.0), sequences=10_000)


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
    options = lib.ReadOptions() if threads else lib.ReadOptions(num_threads=0)
    parent = lib.MapDataset.source(data).to_iter_dataset(options)
    pack = getattr(lib.experimental, PACKERS[strategy])
    length_struct = {name: LENGTH for name in FEATURES}
    return pack(parent, length_struct=length_struct, num_packing_bins=BINS, seed=SEED)


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


def count_made(make: Callable[[], Any]) -> int:
    """Counts the elements of a fresh `make()`."""
    return count(make())


def check_equal(outputs: dict[str, Callable[[], Any]]) -> int:
    """Asserts that the implementations yield equal elements, in lockstep; returns how many."""
    names = list(outputs)
    iterators = [iter(make()) for make in outputs.values()]
    total = 0
    for total, elements in enumerate(itertools.zip_longest(*iterators), 1):
        h.require(elements[0] is not None, f"{names[0]} yields fewer elements than another")
        for name, element in zip(names[1:], elements[1:]):
            h.require(element is not None, f"{name} yields fewer elements than {names[0]}")
            assert_elements_equal(element, elements[0], f"{name} element {total - 1}")
    return total


def pack_row(c: Config, strategy: str, data: list[Any]) -> list[h.Row]:
    import grain

    small = data[:2_000]
    makers: dict[str, Callable[[], Any]] = {
        h.GRAINFN: lambda: packed(grainfn, strategy, data),
        h.GRAIN: lambda: packed(grain, strategy, data),
        h.GRAIN_SYNC: lambda: packed(grain, strategy, data, threads=False),
    }
    if strategy == "First-fit":
        makers[h.HAND] = lambda: hand_first_fit(data)
    # Grain with and without threads runs the same packer: check against the faster one.
    rows = check_equal({key: make for key, make in makers.items() if key != h.GRAIN})
    cases = {key: h.Case(functools.partial(count_made, make)) for key, make in makers.items()}
    for key, threads in ((h.GRAIN, True), (h.GRAIN_SYNC, False)):  # warmed up on a small input
        warmup = functools.partial(count, packed(grain, strategy, small, threads))
        cases[key] = dataclasses.replace(cases[key], warmup=warmup)
    t = h.measure(cases, c.timer)
    for label, result in h.results(t).items():
        h.require(result == rows, f"{strategy} {label} read {result} elements, not {rows}")
    title = f"{BINS} bins of {LENGTH}"
    also = " and the hand loop's" if h.HAND in makers else ""
    detail = f"{len(data):,} sequences, {rows:,} packed elements, all equal to Grain's{also}"
    return [h.Row(strategy, title, h.per_item(t, len(data)), len(data), detail=detail)]


def steps(c: Config) -> list[h.Step]:
    data = make_data(c.sequences)
    return [
        h.Step(key, functools.partial(pack_row, c, key, data)) for key in ("First-fit", "Best-fit")
    ]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    first_fit, best_fit = rows["First-fit"], rows["Best-fit"]
    hand = first_fit.over(h.HAND)
    return [
        h.Target.at_least(
            "First-fit: grainfn >= 1.0x Grain default", first_fit.speedup(h.GRAIN), 1.0
        ),
        h.Target.at_least(
            "Best-fit: grainfn >= 1.0x Grain default", best_fit.speedup(h.GRAIN), 1.0
        ),
        h.Target.at_most("First-fit: grainfn within 1.5x of the hand loop", hand, 1.5),
        h.Target.check("Packed elements = Grain's (checked before timing)", True),
    ]


if __name__ == "__main__":
    run_suite("packing", __doc__ or "", steps, targets, DEFAULT, QUICK)
