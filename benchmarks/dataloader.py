"""DataLoader benchmarks: grainfn's `DataLoader` against Grain's, with 0 and 2 workers.

The same loader in both (a shuffled `IndexSampler`, the same operations). D1: a cheap pipeline, 0
workers, and a hand loop; D2: a ~1 ms map; D3: 32x32x3 images; State: across worker counts.
Grain's 2 workers batch apart: compared as a multiset. See docs/performance.md, "DataLoader".
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks import workers as wk
from benchmarks.run import run_suite

SEED, D1_BATCH, D2_BATCH, D3_BATCH = 42, 32, 8, 64
IMAGE_SHAPE = (32, 32, 3)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
LOADERS = {  # what D1's checks call the implementations it compares grainfn with
    h.GRAIN: "Grain DataLoader, default ReadOptions",
    h.GRAIN_SYNC: "Grain DataLoader, ReadOptions(num_threads=0)",
    h.HAND: "hand loop",
}


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    """`timer` times D1's grainfn and hand loop."""

    d1_n: int = 100_000  # D1: records of the source
    grain_budget: float = 20.0  # D1: seconds of timed runs per Grain case before repeats stop
    warmup_n: int = 2_000  # D1: records of the small loaders Grain warms up on
    d2_n: int = 1000
    d3_n: int = 20_000
    repeats: int = 5  # D2, D3: timed runs per case
    state_n: int = 20_000  # State: records of D1's loader


DEFAULT = Config(h.Timer(repeats=5, min_time=3.0))
QUICK = Config(
    h.Timer(repeats=2),
    d1_n=10_000,
    grain_budget=2.0,
    warmup_n=500,
    d2_n=120,
    d3_n=4_000,
    repeats=1,
    state_n=3_000,
)


def d1_operations(lib: Any) -> list[Any]:
    """D1's operations with `lib`'s classes: map, random map, filter, batch."""

    class TwiceAndOne(lib.transforms.Map):
        def map(self, x: Any) -> Any:
            return x * 2 + 1

    class AddNoise(lib.transforms.RandomMap):
        def random_map(self, x: Any, rng: np.random.Generator) -> Any:
            return x + rng.integers(1000)

    class NotMultipleOf3(lib.transforms.Filter):
        def filter(self, x: Any) -> bool:
            return x % 3 != 0

    return [TwiceAndOne(), AddNoise(), NotMultipleOf3(), lib.transforms.Batch(D1_BATCH)]


def spin_operations(lib: Any, work: wk.Spin) -> list[Any]:
    """D2's operations with `lib`'s classes: `Map(work)`, `Batch(8)`."""

    class SpinMap(lib.transforms.Map):
        def __init__(self, work: wk.Spin) -> None:
            self.work = work

        def map(self, x: Any) -> Any:
            return self.work(x)

    return [SpinMap(work), lib.transforms.Batch(D2_BATCH)]


@dataclasses.dataclass(frozen=True)
class ImageSource:
    """Record `k`: a uint8 (32, 32, 3) array of `k % 256`, its first three bytes `k`."""

    length: int

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: int) -> np.ndarray:
        key = int(key)
        image = np.full(IMAGE_SHAPE, key % 256, dtype=np.uint8)
        image[0, 0] = ((key >> 16) & 255, (key >> 8) & 255, key & 255)
        return image


def image_keys(batch: np.ndarray) -> np.ndarray:
    """The record keys of a batch of `ImageSource` records (from their first three bytes)."""
    head = batch[:, 0, 0].astype(np.int64)
    return (head[:, 0] << 16) | (head[:, 1] << 8) | head[:, 2]


def sampler(lib: Any, n: int) -> Any:
    """The IndexSampler every loader reads with: one shuffled epoch of `n` records."""
    no_sharding = lib.sharding.NoSharding()
    return lib.samplers.IndexSampler(n, no_sharding, shuffle=True, num_epochs=1, seed=SEED)


def loader(
    lib: Any, source: Any, operations: list[Any], workers: int = 0, options: Any = None
) -> Any:
    """`lib.DataLoader` over `source` with `sampler(lib, len(source))`."""
    return lib.DataLoader(
        data_source=source,
        sampler=sampler(lib, len(source)),
        operations=operations,
        worker_count=workers,
        read_options=options,
    )


def multiset(batches: list[Any]) -> np.ndarray:
    """The records of `batches`, sorted: what two orders of the same records share."""
    if not batches:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate([np.asarray(b).reshape(-1) for b in batches]))


def hand_d1(source: list[int], keys_of: Callable[[np.ndarray], list[int]]) -> list[np.ndarray]:
    """D1 by hand: the sampler's order, then map, random map, filter, batch; record `g`'s generator
    `Philox(key=SEED + g)`, as Grain's sampler makes it, by rewinding one bit generator."""
    keys = keys_of(np.arange(len(source), dtype=np.int64))
    bits = np.random.Philox(key=0)
    rng = np.random.Generator(bits)
    state = bits.state
    inner = state["state"]
    zero = np.zeros(4, dtype=np.uint64)
    out: list[np.ndarray] = []
    batch: list[Any] = []
    for g, key in enumerate(keys):
        x: Any = source[key] * 2 + 1
        inner["key"] = np.array([SEED + g, 0], dtype=np.uint64)
        inner["counter"] = zero
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        bits.state = state
        x = x + rng.integers(1000)
        if x % 3 != 0:
            batch.append(x)
            if len(batch) == D1_BATCH:
                out.append(np.array(batch))
                batch = []
    if batch:
        out.append(np.array(batch))
    return out


def cheap(c: Config) -> list[h.Row]:
    grain, n = wk.library("Grain"), c.d1_n
    source, small = list(range(n)), list(range(c.warmup_n))
    ours = loader(grainfn, source, d1_operations(grainfn))
    keys_of = sampler(grainfn, n).record_keys
    cases = {h.GRAINFN: h.Case(lambda: list(ours))}
    for key, options in ((h.GRAIN, None), (h.GRAIN_SYNC, grain.ReadOptions(num_threads=0))):
        full, warm = (loader(grain, r, d1_operations(grain), 0, options) for r in (source, small))
        cases[key] = h.Case(h.reader(full), h.reader(warm), budget=c.grain_budget)
    cases[h.HAND] = h.Case(lambda: hand_d1(source, keys_of))
    t = h.measure(cases, c.timer)
    out = h.results(t)
    h.require(bool(out[h.GRAINFN]), "D1: grainfn read no batches")
    checks = {f"= {name}": h.same_outputs(out[h.GRAINFN], out[k]) for k, name in LOADERS.items()}
    rates = ", ".join(
        f"{k} {h.fmt_rate(n / v.best, ' records/s')} ({len(v.runs)} runs)" for k, v in t.items()
    )
    detail = f"{n:,} records, {len(out[h.GRAINFN]):,} batches; records read per second: {rates}"
    key = "D1 cheap pipeline, 0 workers"
    return [h.Row(key, "", h.per_item(t, n), n, detail=detail, checks=checks)]


def worker_checks(outputs: dict[tuple[str, int], Any]) -> dict[str, bool]:
    """grainfn 2 = grainfn 0 = Grain 0, batch by batch; Grain 2 as a multiset (and in order)."""
    ours, theirs = outputs["grainfn", 0], outputs["Grain", 2]
    return {
        "grainfn 2 workers = grainfn 0 workers": h.same_outputs(outputs["grainfn", 2], ours),
        "grainfn 0 workers = Grain 0 workers": h.same_outputs(outputs["Grain", 0], ours),
        "Grain 2 workers: same records (as a multiset)": np.array_equal(
            multiset(theirs), multiset(ours)
        ),
        "Grain 2 workers: same batches, in order": h.same_outputs(theirs, ours),
    }


def cpu_bound(c: Config, work: wk.Spin) -> list[h.Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return loader(lib, list(range(size)), spin_operations(lib, work), workers)

    timing = (c.d2_n, 2 * D2_BATCH, c.repeats, (0, 2))
    reads, outputs = wk.time_workers(wk.libraries(), build, wk.timed_read, *timing)
    h.require(len(multiset(outputs["grainfn", 2])) == c.d2_n, "D2: grainfn lost records")
    rows = wk.worker_rows("D2", reads, c.d2_n)
    detail = (
        f"CPU-bound: {c.d2_n} records, spin of {work.iterations:,} loop steps, Batch({D2_BATCH})"
    )
    return [dataclasses.replace(rows[0], detail=detail, checks=worker_checks(outputs)), *rows[1:]]


def check_images(batches: Any, n: int) -> bool:
    """Reads `batches` untimed: every batch's shape and dtype, every byte of every record."""
    correct, keys = True, []
    with wk.reading(batches) as it:
        for batch in it:
            shape = batch.shape[1:] == IMAGE_SHAPE and 0 < len(batch) <= D3_BATCH
            correct &= batch.dtype == np.uint8 and shape
            if not correct:
                break
            keys.append(image_keys(batch))
            fill = (keys[-1] % 256).astype(np.uint8)
            correct &= bool((batch.reshape(len(batch), -1)[:, 3:] == fill[:, None]).all())
    return correct and np.array_equal(multiset(keys), np.arange(n))


def images(c: Config) -> list[h.Row]:
    def build(lib: Any, size: int, workers: int) -> Any:
        return loader(lib, ImageSource(size), [lib.transforms.Batch(D3_BATCH)], workers)

    read, timing = functools.partial(wk.timed_read, keep=image_keys), (4 * D3_BATCH, c.repeats)
    reads, outputs = wk.time_workers(wk.libraries(), build, read, c.d3_n, *timing, (0, 2))
    every = np.array_equal(multiset(outputs["grainfn", 2]), np.arange(c.d3_n))
    h.require(every, "D3: grainfn lost records")
    checks = worker_checks(outputs)
    bytes_ok = check_images(build(grainfn, c.d3_n, 2), c.d3_n)
    checks["grainfn 2 workers, every byte of every record"] = bytes_ok
    rows = wk.worker_rows("D3", reads, c.d3_n)
    megabytes, batches = c.d3_n * IMAGE_BYTES / 1e6, -(-c.d3_n // D3_BATCH)
    ends = {f"{k} {wk.plural(w, 'worker')}": min(r.total for r in v) for (k, w), v in reads.items()}
    rates = "; ".join(
        f"{k}: {h.fmt_rate(batches / s, ' batches/s')}, {megabytes / s:.1f} MB/s"
        for k, s in ends.items()
    )
    kib = IMAGE_BYTES / 2**10
    detail = f"images: {c.d3_n:,} records of {kib:.0f} KiB, {batches:,} batches; {rates}"
    return [dataclasses.replace(rows[0], detail=detail, checks=checks), *rows[1:]]


def checkpoints(c: Config) -> list[h.Row]:
    source = list(range(c.state_n))
    expected = list(loader(grainfn, source, d1_operations(grainfn), 0))
    k = len(expected) // 2
    checks: dict[str, bool] = {}
    for taken, restored in ((2, 0), (0, 2)):
        head, state = wk.take_state(loader(grainfn, source, d1_operations(grainfn), taken), k)
        rest = wk.resume(loader(grainfn, source, d1_operations(grainfn), restored), state)
        same = h.same_outputs([*head, *rest], [*expected[: k + 1], *expected[k:]])
        checks[f"taken with {wk.plural(taken, 'worker')}, restored with {restored}"] = same
    batches = f"{len(expected):,} batches"
    detail = f"D1's loader over {c.state_n:,} ints ({batches}); get_state() after {k:,}"
    return [h.Row("State", "across worker counts", {}, detail=detail, checks=checks)]


def steps(c: Config) -> list[h.Step]:
    work = wk.calibrate(0.001)  # about 1 ms per record
    return [
        h.Step("D1", functools.partial(cheap, c)),
        h.Step("D2", functools.partial(cpu_bound, c, work)),
        h.Step("D3", functools.partial(images, c)),
        h.Step("State", functools.partial(checkpoints, c)),
    ]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    d1 = rows["D1 cheap pipeline, 0 workers"]
    d2 = {w: rows[f"D2 {wk.plural(w, 'worker')}, end to end"] for w in (0, 2)}
    d3 = rows["D3 0 workers, end to end"]
    out = [
        h.Target.at_least(f"D1: grainfn >= 2x Grain ({options}), worker_count=0", d1.speedup(g), 2)
        for g, options in (
            (h.GRAIN, "default ReadOptions"),
            (h.GRAIN_SYNC, "ReadOptions(num_threads=0)"),
        )
    ]
    out += h.Target.checks("D1: grainfn's batches {}", d1.checks)
    speedup = h.ratio(d2[0].per_item[h.GRAINFN], d2[2].per_item[h.GRAINFN])
    text = "D2: grainfn 2 workers >= 1.6x faster than 0 workers (end to end)"
    out.append(h.Target.at_least(text, speedup, 1.6))
    text = "D2: grainfn 2 workers not slower than Grain 2 workers (end to end)"
    out.append(h.Target.at_least(text, d2[2].speedup("Grain"), 1))
    for label, checks in (("D2", d2[0].checks), ("D3", d3.checks)):  # not Grain's own batching
        kept = {name: ok for name, ok in checks.items() if not name.endswith("in order")}
        out += h.Target.checks(f"{label}: {{}}", kept)
    out += h.Target.checks("State {} workers: the remaining batches", rows["State"].checks)
    return out


if __name__ == "__main__":
    run_suite("dataloader", __doc__ or "", steps, targets, DEFAULT, QUICK)
