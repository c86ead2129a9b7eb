"""Map-level benchmarks: grainfn's `fn` datasets against Google Grain and hand-written loops.

Each row: grainfn (`list(fn.elements(ds))`), Grain's `to_iter_dataset()` (default and 0 threads),
`ds[i]` where natural, a hand loop; outputs equal to Grain's. B1: shuffle, map, batch; B2:
random_map; B4: a mix; B5a, B5b: index resolution, random access; B6, B7: batch and map.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks.run import run_suite
from grainfn import fn

FACADE, GRAIN_RANDOM = "grainfn facade", "Grain `ds[i]`"
BATCH = 32
B4_WEIGHTS = (0.5, 0.3, 0.2)
B4_PERIOD = np.repeat(np.arange(3), [round(w * 10) for w in B4_WEIGHTS])  # the B4 hand loop's
B5_EPOCHS, B5_SLICE, B5_SEED, B5_BLOCK = 10, slice(1, None, 3), 7, 65_536
B5B_LENGTH, B5B_SEED = 2**40, 3


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    b1_n: int = 200_000  # also B6's and B7's
    b2_n: int = 50_000
    b4_sizes: tuple[int, int, int] = (25_000, 15_000, 10_000)
    b5_n: int = 3_000_000  # B5a: range(n), repeated B5_EPOCHS times, sliced 1::3: n * 10 / 3
    b5_sample: int = 20_000  # Grain positions measured in B5a and B5b
    warmup_n: int = 1_000  # size of the small pipelines Grain is warmed up on


DEFAULT = Config(h.Timer(repeats=5, min_time=3.0, budget=15.0, burst=1.0))
QUICK = Config(
    timer=h.Timer(repeats=3, min_time=0.3, budget=2.0, burst=0.1),
    b1_n=20_000,
    b2_n=2_000,
    b4_sizes=(5_000, 3_000, 2_000),
    b5_n=300_000,
    b5_sample=2_000,
    warmup_n=200,
)


def add_one(x: int) -> int:
    return x + 1


def twice_plus_one(x: Any) -> Any:
    return x * 2 + 1


def add_random(x: int, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 100)


def clear_shuffle_tables() -> None:
    """Forgets grainfn's cached shuffle tables: every run pays for its own, as a new epoch does."""
    try:
        from grainfn._src.index import shuffle

        shuffle._table.cache_clear()
    except (ImportError, AttributeError):  # the index package changed: nothing to clear
        pass


def b1_pipeline(lib: Any, n: int) -> Any:
    return lib.MapDataset.range(n).seed(0).shuffle().map(add_one).batch(BATCH)


def b2_pipeline(lib: Any, n: int) -> Any:
    return lib.MapDataset.range(n).seed(0).random_map(add_random)


def b6_pipeline(lib: Any, n: int) -> Any:
    return lib.MapDataset.range(n).seed(0).shuffle().batch(BATCH).map(twice_plus_one)


def b7_pipeline(lib: Any, n: int) -> Any:
    return lib.MapDataset.range(n).seed(0).shuffle().map(twice_plus_one).batch(BATCH)


def b4_pipeline(lib: Any, sizes: tuple[int, ...], n: int) -> Any:
    """The mix of `n` elements in all, the components in the proportions of `sizes`."""
    scale = n / sum(sizes)
    parts = [lib.MapDataset.range(round(s * scale)).seed(k).shuffle() for k, s in enumerate(sizes)]
    return lib.MapDataset.mix(parts, list(B4_WEIGHTS))


def core_b1(n: int) -> Any:
    return fn.batch(BATCH, fn.map(add_one, fn.shuffle(fn.seed(0, fn.range(n)))))


def core_b6(n: int) -> Any:
    return fn.map(twice_plus_one, fn.batch(BATCH, fn.shuffle(fn.seed(0, fn.range(n)))))


def core_b7(n: int) -> Any:
    return fn.batch(BATCH, fn.map(twice_plus_one, fn.shuffle(fn.seed(0, fn.range(n)))))


def core_b4(sizes: tuple[int, ...]) -> Any:
    parts = [fn.shuffle(fn.seed(k, fn.range(s))) for k, s in enumerate(sizes)]
    return fn.mix(parts, list(B4_WEIGHTS))


def hand_b1(n: int) -> list[np.ndarray]:
    """A numpy permutation as a list, `x + 1` per element, an array per batch."""
    order = np.random.default_rng(0).permutation(n).tolist()
    return [np.array([x + 1 for x in order[i : i + BATCH]]) for i in range(0, n, BATCH)]


def hand_b2(stage_seed: int, n: int) -> list[Any]:
    """One Philox bit generator rewound to counter [0, 0, 0, i] for element i: Grain's stream."""
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


def hand_b4(sizes: tuple[int, ...]) -> list[int]:
    """The components' numpy permutations interleaved in the fixed `B4_PERIOD`."""
    total = sum(sizes)
    rng = np.random.default_rng(0)
    which = np.tile(B4_PERIOD, total // B4_PERIOD.size)
    out = np.empty(total, dtype=np.int64)
    for c, size in enumerate(sizes):
        out[which == c] = rng.permutation(size)
    return out.tolist()


def hand_b6(n: int) -> list[np.ndarray]:
    """A numpy permutation sliced into batches, `b * 2 + 1` per batch."""
    perm = np.random.default_rng(0).permutation(n)
    return [perm[i : i + BATCH] * 2 + 1 for i in range(0, n, BATCH)]


def hand_b7(n: int) -> list[np.ndarray]:
    """A numpy permutation as a list, the map called per element, `np.array` per batch."""
    order = np.random.default_rng(0).permutation(n).tolist()
    return [np.array([twice_plus_one(x) for x in order[i : i + BATCH]]) for i in range(0, n, BATCH)]


BATCHES = {  # B1, B6, B7: key -> title, grainfn's core, the facade's and Grain's, hand loop
    "B1": (f"shuffle+map+batch({BATCH})", core_b1, b1_pipeline, hand_b1),
    "B6": (f"shuffle+batch({BATCH})+map(b*2+1)", core_b6, b6_pipeline, hand_b6),
    "B7": (f"shuffle+map(x*2+1)+batch({BATCH})", core_b7, b7_pipeline, hand_b7),
}


def batches(c: Config, key: str) -> list[h.Row]:
    """B1, B6, B7: batches of a shuffled range, equal in every implementation but the hand's."""
    title, core, pipeline, hand = BATCHES[key]
    n, count, ds = c.b1_n, math.ceil(c.b1_n / BATCH), core(c.b1_n)
    cases = {h.GRAINFN: h.Case(lambda: list(fn.elements(ds)))}
    if key != "B1":
        cases[FACADE] = h.Case(h.reader(pipeline(grainfn, n)))
    cases |= h.grain_cases(functools.partial(pipeline, grain), n, c.warmup_n)
    cases[h.HAND] = h.Case(functools.partial(hand, n))
    t = h.measure(cases, c.timer)
    for label, timing in t.items():
        h.require(len(timing.result) == count, f"{key} {label}: {len(timing.result)} batches")
        same = label == h.HAND or h.same_outputs(t[h.GRAINFN].result, timing.result)
        h.require(same, f"{key}: grainfn != {label}")
    ours, theirs = (np.sort(np.concatenate(t[k].result)) for k in (h.GRAINFN, h.HAND))
    h.require(np.array_equal(ours, theirs), f"{key}: the hand loop's values != grainfn's")
    detail = f"{n:,} elements, {count:,} batches each; grainfn = {', '.join(list(cases)[1:-1])}"
    return [h.Row(key, title, h.per_item(t, count), count, detail=detail)]


def b2(c: Config, key: str) -> list[h.Row]:
    n = c.b2_n
    ds = fn.random_map(add_random, fn.seed(0, fn.range(n)))
    seed = ds.seed  # the seed fn.seed(0) derives for this stage (Grain's rule)
    variant = "hand loop variant: default_rng((seed, i))"

    def hand_default_rng() -> list[Any]:  # a fresh generator per element (a different stream)
        return [i + np.random.default_rng((seed, i)).integers(0, 100) for i in range(n)]

    cases = {
        h.GRAINFN: h.Case(lambda: list(fn.elements(ds))),
        **h.grain_cases(functools.partial(b2_pipeline, grain), n, c.warmup_n),
        h.HAND: h.Case(lambda: hand_b2(seed, n)),
        variant: h.Case(hand_default_rng, repeats=min(2, c.timer.repeats), min_time=0.0),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    h.require(all(len(result) == n for result in out.values()), "B2: wrong number of elements")
    for label in (h.GRAIN, h.GRAIN_SYNC, h.HAND):
        h.require(out[h.GRAINFN] == out[label], f"B2: grainfn != {label}")
    detail = f"{n:,} elements; grainfn = Grain (both) = hand loop (Philox rewound per element)"
    return [h.Row(key, "random_map", h.per_item(t, n), n, detail=detail)]


def b4(c: Config, key: str) -> list[h.Row]:
    sizes, total = c.b4_sizes, sum(c.b4_sizes)
    proportional = all(s * 10 == total * round(w * 10) for s, w in zip(sizes, B4_WEIGHTS))
    h.require(proportional, "B4 sizes must be proportional to the weights (the hand loop's period)")
    ds = core_b4(sizes)
    h.require(ds.length == total, f"B4: mix length {ds.length}, expected {total}")
    cases = {
        h.GRAINFN: h.Case(lambda: list(fn.elements(ds)), setup=clear_shuffle_tables),
        **h.grain_cases(functools.partial(b4_pipeline, grain, sizes), total, c.warmup_n),
        h.HAND: h.Case(lambda: hand_b4(sizes)),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    h.require(all(len(result) == total for result in out.values()), "B4: wrong number of elements")
    h.require(out[h.GRAINFN] == out[h.GRAIN] == out[h.GRAIN_SYNC], "B4: grainfn != Grain")
    same = sorted(out[h.GRAINFN]) == sorted(out[h.HAND])
    h.require(same, "B4: hand loop != grainfn as multisets")
    detail = f"{total:,} elements each, weights {list(B4_WEIGHTS)}; grainfn = Grain (both)"
    return [h.Row(key, "mix of 3 shuffled ranges", h.per_item(t, total), total, detail=detail)]


def b5a(c: Config, key: str) -> list[h.Row]:
    from grainfn._src.index.shuffle import shuffle_indices
    from grainfn._src.index.slicing import slice_indices, slice_params

    n, sample = c.b5_n, c.b5_sample
    parent_length = B5_EPOCHS * n
    start, step, length = slice_params(B5_SLICE, parent_length)
    ds = fn.shuffle(fn.slice(B5_SLICE, fn.repeat(B5_EPOCHS, fn.range(n))), seed=B5_SEED)
    h.require(ds.length == length, f"B5a: length {ds.length}, expected {length}")
    theirs = grain.MapDataset.range(n).repeat(B5_EPOCHS).slice(B5_SLICE).shuffle(seed=B5_SEED)
    blocks = [(i, min(i + B5_BLOCK, length)) for i in range(0, length, B5_BLOCK)]
    positions = np.random.default_rng(0).integers(0, length, sample)

    def block_path() -> int:  # the dataset's block reads, Python ints out
        return sum(len(ds.get_many(np.arange(first, stop))) for first, stop in blocks)

    def index_functions() -> int:  # the bare index functions on the same blocks, numpy out
        count = 0
        for first, stop in blocks:
            shuffled = shuffle_indices(np.arange(first, stop, dtype=np.int64), length, B5_SEED)
            count += (slice_indices(shuffled, start, step, length, parent_length) % n).size
        return count

    def hand() -> int:  # a different permutation, held in memory: O(length) int64s at once
        return ((start + np.random.permutation(length) * step) % n).size

    ours = {  # the rows' names: how grainfn resolves the positions
        f"{key} block path (get_many)": h.Case(block_path),
        f"{key} fn.elements (its own blocks)": h.Case(lambda: sum(1 for _ in fn.elements(ds))),
        f"{key} index functions only": h.Case(index_functions),
    }
    cases = {
        **ours,
        **h.grain_cases(lambda size: theirs.slice(slice(0, size)), sample, c.warmup_n),
        GRAIN_RANDOM: h.Case(lambda: [theirs[i] for i in positions.tolist()]),
        h.HAND: h.Case(hand),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    for key in [*ours, h.HAND]:
        h.require(out[key] == length, f"{key}: {out[key]} positions")
    same = out[h.GRAIN] == ds.get_many(np.arange(sample)) == out[h.GRAIN_SYNC]
    h.require(same, "B5a: grainfn != Grain on the first positions")
    h.require(out[GRAIN_RANDOM] == ds.get_many(positions), "B5a: grainfn != Grain ds[i]")
    grain_figures = h.per_item({k: t[k] for k in (h.GRAIN, h.GRAIN_SYNC, GRAIN_RANDOM)}, sample)
    detail = (
        f"{length:,} positions, blocks of {B5_BLOCK:,}; = Grain on {sample:,} (in order for Grain "
        "default and threads=0, at random for `ds[i]`); the hand loop is `np.random.permutation` "
        "plus the slice arithmetic: a different permutation, held in O(n) memory. The index "
        "functions row: the bare index math on the same blocks, numpy out."
    )
    figures = {
        key: {h.GRAINFN: t[key].best / length, **grain_figures, h.HAND: t[h.HAND].best / length}
        for key in ours
    }
    sampled = (h.GRAIN, h.GRAIN_SYNC, GRAIN_RANDOM)
    return [
        h.Row(key, "", figures[key], length, "rate", detail="" if i else detail, sampled=sampled)
        for i, key in enumerate(ours)
    ]


def b5b(c: Config, key: str) -> list[h.Row]:
    from grain._src.python.experimental.index_shuffle.python import index_shuffle_module

    sample = c.b5_sample
    ds = fn.shuffle(fn.range(B5B_LENGTH), seed=B5B_SEED)
    theirs = grain.MapDataset.range(B5B_LENGTH).shuffle(seed=B5B_SEED)
    positions = np.random.default_rng(1).integers(0, B5B_LENGTH, sample)
    as_list = positions.tolist()
    get, shuffle, bare = ds.get, index_shuffle_module.index_shuffle, "Grain bare index_shuffle"

    def bare_index_shuffle() -> list[int]:
        max_index = B5B_LENGTH - 1
        return [shuffle(i, max_index=max_index, seed=B5B_SEED, rounds=4) for i in as_list]

    cases = {
        "get": h.Case(lambda: [get(i) for i in as_list]),
        "get_many": h.Case(lambda: ds.get_many(positions)),
        GRAIN_RANDOM: h.Case(lambda: [theirs[i] for i in as_list]),
        bare: h.Case(bare_index_shuffle),
    }
    t = h.measure(cases, c.timer)
    for label in ("get", "get_many", bare):
        h.require(t[label].result == t[GRAIN_RANDOM].result, f"B5b: {label} != Grain ds[i]")
    figures = h.per_item(t, sample)
    detail = (
        f"{sample:,} positions; = Grain. '{bare}': Grain's C++ `index_shuffle(i, max_index, "
        "seed, rounds=4)` called from Python without the dataset."
    )
    theirs_figures = {GRAIN_RANDOM: figures[GRAIN_RANDOM], bare: figures[bare]}
    names = {"get": f"{key} ds.get(i), range(2**40)", "get_many": f"{key} the same, get_many"}
    return [
        h.Row(name, "", {h.GRAINFN: figures[label], **theirs_figures}, sample, "us", detail=detail)
        for label, name in names.items()
    ]


def steps(c: Config) -> list[h.Step]:
    rows = {"B1": batches, "B2": b2, "B4": b4, "B5a": b5a, "B5b": b5b, "B6": batches, "B7": batches}
    return [h.Step(key, functools.partial(row, c, key)) for key, row in rows.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    b1, others = rows["B1"], [(key, g) for key in ("B2", "B4") for g in (h.GRAIN, h.GRAIN_SYNC)]
    out = [
        h.Target.at_least("B1: >= 10x Grain default throughput", b1.speedup(h.GRAIN), 10),
        h.Target.at_most("B1: within 3x of the hand loop's time", b1.over(h.HAND), 3),
        *(h.Target.at_least(f"{key}: >= 3x {g}", rows[key].speedup(g), 3) for key, g in others),
    ]
    for key, limit in (("B6", 1.5), ("B7", 1.3)):
        for who, label in (("", h.GRAINFN), ("facade ", FACADE)):
            text = f"{key}: {who}within {limit}x of the hand loop's time"
            out.append(h.Target.at_most(text, rows[key].ratio(label, h.HAND), limit))
    return out


if __name__ == "__main__":
    run_suite("map_level", __doc__ or "", steps, targets, DEFAULT, QUICK)
