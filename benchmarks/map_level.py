"""Map-level benchmarks: grainfn against Google Grain and a hand-written loop.

Run from the project root:

    python -m benchmarks.map_level [--quick] [--markdown PATH]

Every benchmark runs, in this one process, grainfn, Grain's `to_iter_dataset()`
with its default ReadOptions (16 threads), Grain with `ReadOptions(num_threads=0)`,
Grain's random access `ds[i]` where that is the natural comparison, and a
hand-written numpy / Python loop that does the same work (the practical limit
for single-process Python). It checks that all produce the same number of
outputs, and that grainfn and Grain produce identical outputs where that is
cheap to compare, then prints a Markdown table of times and ratios and one of
the performance targets (met / NOT met).

- B1: `range(200_000).seed(0).shuffle().map(x + 1).batch(32)`, one epoch.
- B2: `range(50_000).seed(0).random_map(x + rng.integers(0, 100))`, one epoch.
- B4: weighted mix of three seeded, shuffled ranges, one epoch of the mix.
- B5a: index resolution of `shuffle(slice(repeat(range(n))))` over 10**7 positions.
- B5b: random access into a shuffled `range(2**40)`.

Times are wall-clock, best of R runs after a warm-up (see `benchmarks.common`).
The runs of a benchmark's implementations are interleaved and fast ones repeat
for a few seconds, so that other load and the slow phases of a shared machine
hit all of them alike; implementations too slow to run R times get fewer runs
within a time budget, and Grain is warmed up on a small version of the same
pipeline. The report ends with the CPU time other processes used meanwhile.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import grain
import numpy as np

from benchmarks.common import (
    Case,
    Timing,
    fmt_micros,
    fmt_seconds,
    measure_all,
    require,
    same_outputs,
)
from benchmarks.report import (
    GRAIN,
    GRAIN_RANDOM,
    GRAIN_SYNC,
    GRAINFN,
    HAND,
    SAMPLED,
    RatioColumn,
    Row,
    Run,
    Targets,
    results_table,
)
from grainfn import fn

COLUMNS = [GRAINFN, GRAIN, GRAIN_SYNC, GRAIN_RANDOM, HAND]
RATIOS: list[RatioColumn] = [
    ("speed-up vs Grain default", Row.speedup, GRAIN),
    ("vs Grain threads=0", Row.speedup, GRAIN_SYNC),
    ("vs Grain `ds[i]`", Row.speedup, GRAIN_RANDOM),
    ("grainfn time / hand loop time", Row.over, HAND),
]


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` shrinks everything for a smoke run)."""

    repeats: int
    min_time: float  # fast implementations repeat until their runs total this many seconds
    burst: float  # seconds of back-to-back runs of one implementation before the next's turn
    budget: float  # seconds of timed runs per implementation before repeats stop
    b1_n: int
    b2_n: int
    b4_sizes: tuple[int, int, int]
    b5_n: int  # B5a: range(n), repeated B5_EPOCHS times, sliced 1::3 -> n * 10 / 3 positions
    b5_sample: int  # Grain positions measured in B5a and B5b
    warmup_n: int  # size of the small pipelines Grain is warmed up on


DEFAULT = Config(
    repeats=5,
    min_time=3.0,
    burst=1.0,
    budget=15.0,
    b1_n=200_000,
    b2_n=50_000,
    b4_sizes=(25_000, 15_000, 10_000),
    b5_n=3_000_000,
    b5_sample=20_000,
    warmup_n=1_000,
)
QUICK = Config(
    repeats=3,
    min_time=0.3,
    burst=0.1,
    budget=2.0,
    b1_n=20_000,
    b2_n=2_000,
    b4_sizes=(5_000, 3_000, 2_000),
    b5_n=300_000,
    b5_sample=2_000,
    warmup_n=200,
)

BATCH = 32
B4_WEIGHTS = (0.5, 0.3, 0.2)
B5_EPOCHS = 10
B5_SLICE = slice(1, None, 3)
B5_SEED = 7
B5_BLOCK = 65_536  # positions per block call in B5a
B5B_LENGTH = 2**40
B5B_SEED = 3
B4_PERIOD = np.repeat(np.arange(3), [round(w * 10) for w in B4_WEIGHTS])
"""The B4 hand loop's fixed interleaving: 10 positions, 5, 3 and 2 of them per component."""


def per_item(timing: Timing, items: int) -> float:
    return timing.best / items


def per_items(items: int, timings: Sequence[Timing]) -> dict[str, float | None]:
    """Seconds per item of grainfn, Grain default, Grain threads=0 and the hand loop, in order."""
    keys = (GRAINFN, GRAIN, GRAIN_SYNC, HAND)
    return {key: per_item(timing, items) for key, timing in zip(keys, timings, strict=True)}


def run_cases(config: Config, *cases: Case) -> list[Timing]:
    """Times the implementations of one benchmark together, their runs interleaved."""
    return measure_all(
        cases,
        repeats=config.repeats,
        min_time=config.min_time,
        budget=config.budget,
        burst=config.burst,
    )


def grain_iter(ds: Any, sync: bool) -> list[Any]:
    """One epoch through Grain's iterator: default ReadOptions, or no threads if `sync`."""
    if sync:
        return list(ds.to_iter_dataset(grain.ReadOptions(num_threads=0)))
    return list(ds.to_iter_dataset())


def grain_case(config: Config, label: str, build: Callable[[int], Any], n: int, sync: bool) -> Case:
    """One epoch of `build(n)` through Grain's iterator, warmed up on `build(small)`."""
    ds = build(n)
    small = build(config.warmup_n)
    return Case(
        f"{label} Grain {'threads=0' if sync else 'default'}",
        lambda: grain_iter(ds, sync),
        warmup=lambda: grain_iter(small, sync),
    )


def clear_shuffle_tables() -> None:
    """Forgets grainfn's per-(length, seed) shuffle tables so every run pays for its epoch's.

    Shuffles of lengths up to 2**16 cycle-walk a 16-bit block into a table once
    per (length, seed) and cache it; a new epoch has a new seed, so timing
    repeated runs of the same epoch with a warm cache would flatter grainfn.
    """
    try:
        from grainfn._src.index import shuffle as shuffle_module

        shuffle_module._table.cache_clear()
    except (ImportError, AttributeError):  # internals moved: nothing to clear
        pass


# ---------------------------------------------------------------------------
# B1: shuffle + map + batch.


def b1(config: Config) -> Row:
    n = config.b1_n
    print(f"B1: range({n:_}).seed(0).shuffle().map(x + 1).batch({BATCH}), one epoch", flush=True)

    def build_fn(size: int) -> Any:
        return fn.batch(BATCH, fn.map(lambda x: x + 1, fn.shuffle(fn.seed(0, fn.range(size)))))

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).shuffle().map(lambda x: x + 1).batch(BATCH)

    ds = build_fn(n)
    t_fn, t_grain, t_sync, t_hand = run_cases(
        config,
        Case("B1 grainfn", lambda: list(fn.elements(ds))),
        grain_case(config, "B1", build_grain, n, sync=False),
        grain_case(config, "B1", build_grain, n, sync=True),
        Case("B1 hand loop", lambda: hand_b1(n)),
    )

    batches = math.ceil(n / BATCH)
    ours = t_fn.result
    for timing in (t_fn, t_grain, t_sync, t_hand):
        require(len(timing.result) == batches, f"{timing.label}: {len(timing.result)} batches")
    require(same_outputs(ours, t_grain.result), "B1: grainfn != Grain default")
    require(same_outputs(ours, t_sync.result), "B1: grainfn != Grain threads=0")
    values = np.sort(np.concatenate(t_hand.result))
    require(np.array_equal(values, np.arange(1, n + 1)), "B1: hand loop lost elements")
    return Row(
        f"B1 shuffle+map+batch({BATCH}), {n:,} elements",
        per_items(batches, (t_fn, t_grain, t_sync, t_hand)),
        items=batches,
        check=f"{batches:,} batches each; grainfn = Grain (both)",
    )


def hand_b1(n: int) -> list[np.ndarray]:
    """B1 by hand: a numpy permutation as a list, `x + 1` per element, an array per batch."""
    order = np.random.default_rng(0).permutation(n).tolist()
    return [np.array([x + 1 for x in order[i : i + BATCH]]) for i in range(0, n, BATCH)]


# ---------------------------------------------------------------------------
# B2: random_map.


def add_random(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def b2(config: Config) -> Row:
    n = config.b2_n
    print(f"B2: range({n:_}).seed(0).random_map(x + rng.integers(0, 100)), one epoch", flush=True)

    def build_fn(size: int) -> Any:
        return fn.random_map(add_random, fn.seed(0, fn.range(size)))

    def build_grain(size: int) -> Any:
        return grain.MapDataset.range(size).seed(0).random_map(add_random)

    ds = build_fn(n)
    stage_seed = ds.seed  # the seed fn.seed(0) derives for this stage (Grain's rule)

    def hand_default_rng() -> list[Any]:
        # The obvious alternative: a fresh generator per element (a different stream).
        return [i + np.random.default_rng((stage_seed, i)).integers(0, 100) for i in range(n)]

    t_fn, t_grain, t_sync, t_hand, t_alt = run_cases(
        config,
        Case("B2 grainfn", lambda: list(fn.elements(ds))),
        grain_case(config, "B2", build_grain, n, sync=False),
        grain_case(config, "B2", build_grain, n, sync=True),
        Case(
            "B2 hand loop (one Philox, state rewound per element)", lambda: hand_b2(stage_seed, n)
        ),
        Case(
            "B2 hand loop variant: np.random.default_rng((seed, i))",
            hand_default_rng,
            repeats=min(2, config.repeats),
            min_time=0.0,
        ),
    )

    for timing in (t_fn, t_grain, t_sync, t_hand, t_alt):
        require(len(timing.result) == n, f"{timing.label}: {len(timing.result)} elements")
    require(t_fn.result == t_grain.result, "B2: grainfn != Grain default")
    require(t_fn.result == t_sync.result, "B2: grainfn != Grain threads=0")
    require(t_fn.result == t_hand.result, "B2: grainfn != hand loop")
    return Row(
        f"B2 random_map, {n:,} elements",
        per_items(n, (t_fn, t_grain, t_sync, t_hand)),
        items=n,
        check=f"{n:,} elements each; grainfn = Grain (both) = hand loop",
        note=(
            "B2 hand loop: one `np.random.Philox` whose state is rewound to counter "
            "[0, 0, 0, i] per element (the same stream as Grain and grainfn); a fresh "
            f"`np.random.default_rng((seed, i))` per element instead takes "
            f"{fmt_seconds(t_alt.best)}."
        ),
    )


def hand_b2(stage_seed: int, n: int) -> list[Any]:
    """B2 by hand with the cheapest per-element generator found.

    ONE Philox bit generator whose state dict is rewound to counter
    [0, 0, 0, i] before element i. This is Grain's (and grainfn's) per-element
    stream for the stage seed `stage_seed`, so the outputs are identical.
    """
    key = np.random.SeedSequence(stage_seed).generate_state(2, dtype=np.uint64)
    bits = np.random.Philox(key=key)
    rng = np.random.Generator(bits)
    state = bits.state
    counter = state["state"]
    out = []
    for i in range(n):
        counter["counter"] = np.array([0, 0, 0, i], dtype=np.uint64)
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        bits.state = state
        out.append(i + rng.integers(0, 100))
    return out


# ---------------------------------------------------------------------------
# B4: weighted mix of shuffled datasets.


def b4(config: Config) -> Row:
    sizes = config.b4_sizes
    total = sum(sizes)
    print(
        f"B4: mix of range({sizes[0]:_}), range({sizes[1]:_}), range({sizes[2]:_}), each "
        f".seed(k).shuffle(), weights {list(B4_WEIGHTS)}, one epoch",
        flush=True,
    )

    def build_fn(scale: float) -> Any:
        parts = [fn.shuffle(fn.seed(k, fn.range(round(s * scale)))) for k, s in enumerate(sizes)]
        return fn.mix(parts, list(B4_WEIGHTS))

    def build_grain(scale: float) -> Any:
        parts = [
            grain.MapDataset.range(round(s * scale)).seed(k).shuffle() for k, s in enumerate(sizes)
        ]
        return grain.MapDataset.mix(parts, list(B4_WEIGHTS))

    # The hand loop's fixed period of 10 positions needs sizes in its proportions.
    require(
        all(s * 10 == total * round(w * 10) for s, w in zip(sizes, B4_WEIGHTS)),
        "B4 sizes must be proportional to the weights",
    )

    ds = build_fn(1)
    require(ds.length == total, f"B4: mix length {ds.length}, expected {total}")
    t_fn, t_grain, t_sync, t_hand = run_cases(
        config,
        Case("B4 grainfn", lambda: list(fn.elements(ds)), setup=clear_shuffle_tables),
        grain_case(config, "B4", lambda n: build_grain(n / total), total, sync=False),
        grain_case(config, "B4", lambda n: build_grain(n / total), total, sync=True),
        Case("B4 hand loop", lambda: hand_b4(sizes)),
    )

    for timing in (t_fn, t_grain, t_sync, t_hand):
        require(len(timing.result) == total, f"{timing.label}: {len(timing.result)} elements")
    require(t_fn.result == t_grain.result, "B4: grainfn != Grain default")
    require(t_fn.result == t_sync.result, "B4: grainfn != Grain threads=0")
    require(sorted(t_fn.result) == sorted(t_hand.result), "B4: hand loop != grainfn as multisets")
    return Row(
        f"B4 mix of 3 shuffled ranges, {total:,} elements",
        per_items(total, (t_fn, t_grain, t_sync, t_hand)),
        items=total,
        check=f"{total:,} elements each; grainfn = Grain (both)",
    )


def hand_b4(sizes: tuple[int, int, int]) -> list[int]:
    """B4 by hand: the components' permutations interleaved in the fixed `B4_PERIOD`."""
    total = sum(sizes)
    rng = np.random.default_rng(0)
    which = np.tile(B4_PERIOD, total // B4_PERIOD.size)
    out = np.empty(total, dtype=np.int64)
    for c, size in enumerate(sizes):
        out[which == c] = rng.permutation(size)
    return out.tolist()


# ---------------------------------------------------------------------------
# B5a: vectorized index resolution.


def b5a(config: Config) -> list[Row]:
    from grainfn._src.index.shuffle import shuffle_indices
    from grainfn._src.index.slicing import slice_indices, slice_params

    n, sample = config.b5_n, config.b5_sample
    parent_length = B5_EPOCHS * n
    start, step, length = slice_params(B5_SLICE, parent_length)
    print(
        f"B5a: shuffle(slice(1::3, repeat({B5_EPOCHS}, range({n:_})))), seed {B5_SEED}: "
        f"{length:_} positions",
        flush=True,
    )

    ds = fn.shuffle(fn.slice(B5_SLICE, fn.repeat(B5_EPOCHS, fn.range(n))), seed=B5_SEED)
    require(ds.length == length, f"B5a: length {ds.length}, expected {length}")

    def build_grain(size: int) -> Any:  # the first `size` positions of the Grain pipeline
        g = grain.MapDataset.range(n).repeat(B5_EPOCHS).slice(B5_SLICE).shuffle(seed=B5_SEED)
        return g.slice(slice(0, size))

    def block_path() -> int:
        # The dataset's block method, exactly as fn.elements calls it, in blocks of
        # B5_BLOCK: np.arange, shuffle, slice and repeat index math, then the range
        # source's one vectorized op and `.tolist()` (Python ints out).
        count = 0
        for first in range(0, length, B5_BLOCK):
            count += len(ds._get_many(np.arange(first, min(first + B5_BLOCK, length))))
        return count

    def elements() -> int:
        return sum(1 for _ in fn.elements(ds))

    def index_functions() -> int:
        # The bare index functions on the same blocks, numpy int64 out (no .tolist()):
        # shuffle -> slice -> repeat (the identity) -> range's `% n`.
        count = 0
        for first in range(0, length, B5_BLOCK):
            positions = np.arange(first, min(first + B5_BLOCK, length), dtype=np.int64)
            parents = slice_indices(
                shuffle_indices(positions, length, B5_SEED), start, step, length, parent_length
            )
            count += (parents % n).size
        return count

    def hand() -> int:
        # A different permutation, held in memory: O(length) int64s at once.
        order = np.random.permutation(length)
        return ((start + order * step) % n).size

    positions = np.random.default_rng(0).integers(0, length, sample)
    grain_ds = grain.MapDataset.range(n).repeat(B5_EPOCHS).slice(B5_SLICE).shuffle(seed=B5_SEED)

    t_block, t_elements, t_index, t_grain, t_sync, t_random, t_hand = run_cases(
        config,
        Case("B5a grainfn block path", block_path),
        Case("B5a grainfn fn.elements", elements),
        Case("B5a grainfn index functions only", index_functions),
        grain_case(config, "B5a", build_grain, sample, sync=False),
        grain_case(config, "B5a", build_grain, sample, sync=True),
        Case("B5a Grain ds[i]", lambda: [grain_ds[i] for i in positions.tolist()]),
        Case("B5a hand numpy permutation", hand),
    )

    for timing in (t_block, t_elements, t_index, t_hand):
        require(timing.result == length, f"{timing.label}: {timing.result} positions")
    require(len(t_grain.result) == sample and len(t_sync.result) == sample, "B5a: Grain count")
    first = ds.get_many(np.arange(sample))
    require(t_grain.result == first, "B5a: grainfn != Grain default on the first positions")
    require(t_sync.result == first, "B5a: grainfn != Grain threads=0 on the first positions")
    require(t_random.result == ds.get_many(positions), "B5a: grainfn != Grain ds[i]")

    grain_figures = {
        GRAIN: per_item(t_grain, sample),
        GRAIN_SYNC: per_item(t_sync, sample),
        GRAIN_RANDOM: per_item(t_random, sample),
        HAND: per_item(t_hand, length),
    }
    sampled = frozenset({GRAIN, GRAIN_SYNC, GRAIN_RANDOM})
    check = f"{length:,} positions; = Grain on {sample:,}"
    grainfn_figures = [
        (f"B5a index resolution, block path (`_get_many`, blocks of {B5_BLOCK:,})", t_block),
        ("B5a index resolution, `fn.elements` (its own adaptive blocks)", t_elements),
        (f"B5a index functions only (numpy out, blocks of {B5_BLOCK:,})", t_index),
    ]
    return [
        Row(
            name,
            {GRAINFN: per_item(timing, length), **grain_figures},
            unit="rate",
            items=length,
            check=check,
            sampled=sampled,
        )
        for name, timing in grainfn_figures
    ]


# ---------------------------------------------------------------------------
# B5b: random access into a huge shuffle.


def b5b(config: Config) -> list[Row]:
    from grain._src.python.experimental.index_shuffle.python import index_shuffle_module

    sample = config.b5_sample
    print(f"B5b: shuffle(range(2**40), seed {B5B_SEED}), {sample:_} random positions", flush=True)
    ds = fn.shuffle(fn.range(B5B_LENGTH), seed=B5B_SEED)
    grain_ds = grain.MapDataset.range(B5B_LENGTH).shuffle(seed=B5B_SEED)
    positions = np.random.default_rng(1).integers(0, B5B_LENGTH, sample)
    as_list = positions.tolist()

    def bare_index_shuffle() -> list[int]:
        shuffle = index_shuffle_module.index_shuffle
        max_index = B5B_LENGTH - 1
        return [shuffle(i, max_index=max_index, seed=B5B_SEED, rounds=4) for i in as_list]

    get = ds.get
    t_get, t_many, t_grain, t_bare = run_cases(
        config,
        Case("B5b grainfn ds.get(i)", lambda: [get(i) for i in as_list]),
        Case("B5b grainfn ds.get_many(positions)", lambda: ds.get_many(positions)),
        Case("B5b Grain ds[i]", lambda: [grain_ds[i] for i in as_list]),
        Case("B5b Grain's bare C++ index_shuffle(i, ...)", bare_index_shuffle),
    )

    require(t_get.result == t_grain.result, "B5b: grainfn get != Grain ds[i]")
    require(t_many.result == t_grain.result, "B5b: grainfn get_many != Grain ds[i]")
    require(t_bare.result == t_grain.result, "B5b: Grain's index_shuffle != Grain ds[i]")
    check = f"{sample:,} positions; = Grain"
    return [
        Row(
            "B5b random access `ds.get(i)`, shuffled range(2**40)",
            {GRAINFN: per_item(t_get, sample), GRAIN_RANDOM: per_item(t_grain, sample)},
            unit="us",
            items=sample,
            check=check,
            note=(
                "B5b: Grain's bare C++ `index_shuffle(i, max_index, seed, rounds=4)`, called "
                f"from Python without the dataset, takes {fmt_micros(t_bare.best / sample)} "
                "per position."
            ),
        ),
        Row(
            "B5b the same positions as one `ds.get_many` block",
            {GRAINFN: per_item(t_many, sample), GRAIN_RANDOM: per_item(t_grain, sample)},
            unit="us",
            items=sample,
            check=check,
        ),
    ]


# ---------------------------------------------------------------------------
# Report.


def targets(rows: dict[str, Row]) -> Targets:
    out = Targets()
    out.at_least("B1: >= 10x Grain default throughput", rows["B1"].speedup(GRAIN), 10)
    out.at_most("B1: within 3x of the hand loop's time", rows["B1"].over(HAND), 3)
    for key in ("B2", "B4"):
        out.at_least(f"{key}: >= 3x Grain default", rows[key].speedup(GRAIN), 3)
        out.at_least(f"{key}: >= 3x Grain threads=0", rows[key].speedup(GRAIN_SYNC), 3)
    return out


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.map_level", __doc__, "grainfn map-level benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    b1_row = run.section("b1", lambda: b1(config))
    b2_row = run.section("b2", lambda: b2(config))
    b4_row = run.section("b4", lambda: b4(config))
    b5a_rows = run.section("b5a", lambda: b5a(config))
    b5b_rows = run.section("b5b", lambda: b5b(config))
    rows = [b1_row, b2_row, b4_row, *b5a_rows, *b5b_rows]
    run.stop_clock()

    report = run.report
    report.add(results_table(rows, COLUMNS, RATIOS, check="outputs checked"))
    report.add()
    notes = [
        f"Times are wall-clock, the best run after a warm-up; the runs of a benchmark's "
        f"implementations are interleaved in bursts of about {config.burst:g} s, and each "
        f"implementation runs at least {config.repeats} times and for at least "
        f"{config.min_time:g} s (at most 100 runs), but starts no new run past "
        f"{config.budget:g} s, so the slowest get 1 or 2 runs. "
        "B1, B2, B4: one full epoch. Speed-ups are the other implementation's time "
        "divided by grainfn's (higher is better for grainfn); 'grainfn time / hand loop "
        "time' is below 1 where grainfn is faster.",
        f"{SAMPLED} Grain measured on {config.b5_sample:,} positions and the rate "
        "extrapolated: in-order iteration over the first positions for 'Grain default' and "
        "'Grain threads=0', random positions for '`ds[i]`'. The B5a hand loop is "
        "`np.random.permutation` plus the slice arithmetic: a different permutation, held in "
        "O(n) memory. B5b has no hand loop (a permutation of 2**40 would need 8 TiB).",
        *(row.note for row in rows if row.note),
    ]
    report.add_notes(notes)
    run.finish(targets({"B1": b1_row, "B2": b2_row, "B4": b4_row}))


if __name__ == "__main__":
    main()
