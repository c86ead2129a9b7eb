"""Elastic benchmarks: `grainfn.experimental.ElasticIterator` against the same pipeline batched.

One host, every logical shard, global batches of 256 rows, figures per row. E1: a filtered,
mapped IterDataset on 16 logical shards against `batch(256)`, Grain (sampled) and a numpy hand
loop; E2a, E2b: a map-only MapDataset in Grain's mode and in logical-shard mode.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import grain
import numpy as np

import grainfn
from benchmarks import harness as h
from benchmarks.map_level import add_one
from benchmarks.run import run_suite
from grainfn.experimental import DatasetOptions, ElasticIterator, WithOptionsIterDataset

ELASTIC = "grainfn ElasticIterator"
ELASTIC_UNCHECKED = "grainfn ElasticIterator, no filter check"
PLAIN = "grainfn batch(256)"
UNCHECKED = "grainfn batch(256), no filter check"
MAP_BATCH = "grainfn map-level batch(256)"
GLOBAL_BATCH, SHARDS, E1_SEED, E2_SEED = 256, 16, 5, 6
NOT_THE_CUT = "the elastic batches != the numpy cut of the pipeline's permutation"


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    n: int = 199_680  # elements of the range; a multiple of 384: E1 keeps whole global batches
    grain_n: int = 7_680  # elements Grain is measured on
    warmup_n: int = 768  # elements of the small pipelines Grain is warmed up on
    grain_budget: float = 4.0  # seconds of timed runs per Grain case before repeats stop


DEFAULT = Config(h.Timer(repeats=7, min_time=1.5, budget=10.0, burst=0.5))
QUICK = Config(
    h.Timer(repeats=3, min_time=0.2, budget=1.0, burst=0.1),
    n=19_968,
    grain_n=1_536,
    warmup_n=384,
    grain_budget=1.0,
)


def keep(x: int) -> bool:
    return x % 3 != 0


def e1_pipeline(lib: Any, n: int) -> Any:
    return (
        lib.MapDataset.range(n).seed(E1_SEED).shuffle().to_iter_dataset().filter(keep).map(add_one)
    )


def e2_pipeline(lib: Any, n: int) -> Any:
    return lib.MapDataset.range(n).seed(E2_SEED).shuffle().map(add_one)


def hand_elastic(order: np.ndarray, filtered: bool) -> list[np.ndarray]:
    """The logical-shard cut in numpy: shard `s` is `order[s::16]`, batch `b` rows 16b:16b+16."""
    rows = GLOBAL_BATCH // SHARDS
    columns = [c[c % 3 != 0] if filtered else c for c in order.reshape(-1, SHARDS).T]
    steps = min(map(len, columns)) // rows
    cut = np.stack([c[: steps * rows].reshape(steps, rows) + 1 for c in columns], axis=1)
    return list(cut.reshape(steps, GLOBAL_BATCH))


def hand_batches(order: np.ndarray) -> list[np.ndarray]:
    """Plain batching in numpy: `order + 1` reshaped into global batches, the tail dropped."""
    steps = len(order) // GLOBAL_BATCH
    return list((order[: steps * GLOBAL_BATCH] + 1).reshape(steps, GLOBAL_BATCH))


def permutation(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n)


def pipeline_order(n: int, seed: int) -> np.ndarray:
    """The positions grainfn's (and Grain's) `range(n).seed(seed).shuffle()` reads."""
    return np.array(list(grainfn.MapDataset.range(n).seed(seed).shuffle()))


def rows_of(batches: list[Any]) -> int:
    return sum(len(b) for b in batches)


def per_row(timings: Mapping[str, h.Timing], out: Mapping[str, list[Any]]) -> h.Figures:
    """The best run of each implementation, divided by the rows it delivered."""
    return {label: timing.best / rows_of(out[label]) for label, timing in timings.items()}


def elastic(ds: Any, shards: int | None = SHARDS) -> Callable[[], list[Any]]:
    """Reads an `ElasticIterator` over `ds` (in logical-shard mode unless `shards` is None)."""
    shard = grainfn.ShardOptions(0, 1)
    if shards is None:
        return lambda: list(ElasticIterator(ds, GLOBAL_BATCH, shard))
    return lambda: list(ElasticIterator(ds, GLOBAL_BATCH, shard, num_logical_shards=shards))


def batched(ds: Any) -> Callable[[], list[Any]]:
    return lambda: list(ds.batch(GLOBAL_BATCH, drop_remainder=True))


def e1(c: Config) -> list[h.Row]:
    n, ds = c.n, e1_pipeline(grainfn, c.n)
    unchecked = WithOptionsIterDataset(ds, DatasetOptions(filter_warn_threshold_ratio=None))

    def theirs(size: int) -> Any:
        return grain.MapDataset.range(size).seed(E1_SEED).shuffle()

    def then(it: Any) -> Any:
        return it.filter(keep).map(add_one).batch(GLOBAL_BATCH, drop_remainder=True)

    cases = {
        ELASTIC: h.Case(elastic(ds)),
        PLAIN: h.Case(batched(ds)),
        ELASTIC_UNCHECKED: h.Case(elastic(unchecked)),
        UNCHECKED: h.Case(batched(unchecked)),
        **h.grain_cases(theirs, c.grain_n, c.warmup_n, then, budget=c.grain_budget),
        h.HAND: h.Case(lambda: hand_elastic(permutation(n, E1_SEED), filtered=True)),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    cut = hand_elastic(pipeline_order(n, E1_SEED), filtered=True)
    h.require(h.same_outputs(out[ELASTIC], cut), f"E1: {NOT_THE_CUT}")
    kept = np.arange(n)[np.arange(n) % 3 != 0] + 1
    h.require(np.array_equal(np.sort(np.hstack(out[PLAIN])), kept), "E1: plain rows != kept rows")
    for a, b in ((UNCHECKED, PLAIN), (ELASTIC_UNCHECKED, ELASTIC)):
        h.require(h.same_outputs(out[a], out[b]), "E1: the filter check changed the rows")
    sample = batched(e1_pipeline(grainfn, c.grain_n))()
    for label in (h.GRAIN, h.GRAIN_SYNC):
        h.require(h.same_outputs(out[label], sample), f"E1: {label} != grainfn on {c.grain_n:,}")
    rows = {label: rows_of(batches) for label, batches in out.items()}
    detail = (
        f"range({n:,}), {len(kept):,} rows kept; per row delivered: ElasticIterator "
        f"{rows[ELASTIC]:,} rows (= the numpy cut of the pipeline's permutation), batch(256) "
        f"{rows[PLAIN]:,} (every kept row); Grain = grainfn on {c.grain_n:,} elements. "
        "Grain-API iterators, ElasticIterator too, count the rows a filter drops (warn at 90%, "
        "Grain's default); `no filter check` is both with DatasetOptions("
        "filter_warn_threshold_ratio=None)"
    )
    title, figures = f"filter+map, {SHARDS} shards vs batch(256)", per_row(t, out)
    sampled = (h.GRAIN, h.GRAIN_SYNC)
    return [h.Row("E1", title, figures, unit="us", subject=ELASTIC, detail=detail, sampled=sampled)]


def grain_elastic(n: int, options: Any) -> Callable[[], list[Any]]:
    ds, shard = e2_pipeline(grain, n), grain.sharding.ShardOptions(0, 1)
    return lambda: list(
        grain.experimental.ElasticIterator(ds, GLOBAL_BATCH, shard, read_options=options)
    )


def e2a(c: Config) -> list[h.Row]:
    n, ds = c.n, e2_pipeline(grainfn, c.n)
    steps = n // GLOBAL_BATCH
    cases = {ELASTIC: h.Case(elastic(ds, None)), MAP_BATCH: h.Case(batched(ds))}
    for label, options in (
        (h.GRAIN, grain.ReadOptions()),
        (h.GRAIN_SYNC, grain.ReadOptions(num_threads=0)),
    ):
        reads = grain_elastic(c.grain_n, options), grain_elastic(c.warmup_n, options)
        cases[label] = h.Case(*reads, budget=c.grain_budget)
    cases[h.HAND] = h.Case(lambda: hand_batches(permutation(n, E2_SEED)))
    t = h.measure(cases, c.timer)
    out = h.results(t)
    h.require(len(out[ELASTIC]) == steps, f"E2a: {len(out[ELASTIC])} batches, expected {steps}")
    h.require(
        h.same_outputs(out[ELASTIC], out[MAP_BATCH]), "E2a: ElasticIterator != map-level batch"
    )
    sample = elastic(e2_pipeline(grainfn, c.grain_n), None)()
    for label in (h.GRAIN, h.GRAIN_SYNC):
        h.require(h.same_outputs(out[label], sample), f"E2a: {label} != grainfn on {c.grain_n:,}")
    detail = (
        f"range({n:,}), {steps} global batches = the map-level batch(256); Grain's "
        f"ElasticIterator = grainfn's on {c.grain_n:,} elements"
    )
    title, figures = "no filter, vs Grain's ElasticIterator", per_row(t, out)
    sampled = (h.GRAIN, h.GRAIN_SYNC)
    return [
        h.Row("E2a", title, figures, unit="us", subject=ELASTIC, detail=detail, sampled=sampled)
    ]


def e2b(c: Config) -> list[h.Row]:
    n, ds = c.n, e2_pipeline(grainfn, c.n)
    cases = {
        ELASTIC: h.Case(elastic(ds)),
        PLAIN: h.Case(batched(ds.to_iter_dataset())),
        h.HAND: h.Case(lambda: hand_elastic(permutation(n, E2_SEED), filtered=False)),
    }
    t = h.measure(cases, c.timer)
    out = h.results(t)
    cut = hand_elastic(pipeline_order(n, E2_SEED), filtered=False)
    h.require(h.same_outputs(out[ELASTIC], cut), f"E2b: {NOT_THE_CUT}")
    map_batches = batched(ds)()
    h.require(h.same_outputs(out[PLAIN], map_batches), "E2b: stream batch != map-level batch")
    detail = (
        f"range({n:,}), {len(map_batches)} global batches for both (no filter: no row is "
        "dropped); the elastic batches = the numpy cut of the pipeline's permutation"
    )
    title = f"no filter, {SHARDS} shards vs batch(256)"
    return [h.Row("E2b", title, per_row(t, out), unit="us", subject=ELASTIC, detail=detail)]


def steps(c: Config) -> list[h.Step]:
    rows = {"E1": e1, "E2a": e2a, "E2b": e2b}
    return [h.Step(key, functools.partial(row, c)) for key, row in rows.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    e1_row, grain_mode, shards = rows["E1"], rows["E2a"], rows["E2b"]
    logical = f"{SHARDS} logical shards >= 0.9x batch(256)"
    unchecked = e1_row.ratio(UNCHECKED, ELASTIC_UNCHECKED)
    return [
        h.Target.at_least(f"E1: {logical} throughput", e1_row.speedup(PLAIN), 0.9),
        h.Target.at_least(f"E1: {logical}, both with no filter check", unchecked, 0.9),
        h.Target.at_least(
            "E2a: >= 1x Grain's ElasticIterator (default)", grain_mode.speedup(h.GRAIN), 1.0
        ),
        h.Target.at_least(
            "E2a: >= 1x Grain's ElasticIterator (threads=0)", grain_mode.speedup(h.GRAIN_SYNC), 1.0
        ),
        h.Target.at_least(f"E2b: {logical} throughput", shards.speedup(PLAIN), 0.9),
    ]


if __name__ == "__main__":
    run_suite("elastic", __doc__ or "", steps, targets, DEFAULT, QUICK)
