"""Process-pool scaling: `mp_prefetch` with as many workers as the machine has cores for.

- S1: `MapDataset.range(n).map(spin).to_iter_dataset(ReadOptions(num_threads=0))`,
  `spin` a pure-Python loop of about 2 ms, read by grainfn and Grain with 0, 1, 2,
  4, 8 and 16 workers (the counts up to the machine's core count): seconds per
  element from the first element on, and the speed-up over 0 workers. Beside each
  count, the same calls shared by that many plain processes already started: the
  machine's ceiling. `n` grows with the largest count, so every worker has about
  50 elements. On a 2-core machine this is P1 again; it is meant for larger ones.

Grain is imported only where used: spawned workers re-import this module.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from benchmarks.harness import GRAINFN, Row, Target, fmt_ratio, ratio, require
from benchmarks.parallel import plain_processes
from benchmarks.run import Step, run_suite
from benchmarks.workers import (
    calibrate,
    libraries,
    map_pipeline,
    plural,
    time_workers,
    timed_read,
    worker_rows,
)

COUNTS = (0, 1, 2, 4, 8, 16)
CEILING = "processes"
"""The per-item figure of the plain processes: the machine's ceiling."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing (`QUICK` shrinks everything for a smoke run)."""

    per_worker: int  # elements per worker at the largest count
    repeats: int  # timed runs per case
    warmup_n: int  # elements of the small pipelines every case is warmed up on


DEFAULT = Config(per_worker=50, repeats=2, warmup_n=8)
QUICK = Config(per_worker=40, repeats=1, warmup_n=4)


def worker_counts(cores: int | None) -> tuple[int, ...]:
    """The counts of COUNTS this machine has cores for (0 and 1 always)."""
    return tuple(w for w in COUNTS if w <= max(1, cores or 1))


def scaling(c: Config) -> list[Row]:
    counts = worker_counts(os.cpu_count())
    work, n = calibrate(0.002), c.per_worker * max(counts)

    def build(lib: Any, size: int, workers: int) -> Any:
        return map_pipeline(lib, size, work, workers, 1)

    reads, outputs = time_workers(libraries(), build, timed_read, n, c.warmup_n, c.repeats, counts)
    expected = [work(x) for x in range(n)]
    require(outputs[GRAINFN, max(counts)] == expected, "S1: grainfn's output is not the map's")
    rows = {row.key: row for row in worker_rows("S1", reads, n) if row.key.endswith("steady state")}
    zero = rows["S1 0 workers, steady state"].per_item
    one_process = min(plain_processes(work, n, 1) for _ in range(2)) / n
    for workers in counts[1:]:
        key = f"S1 {plural(workers, 'worker')}, steady state"
        ceiling = min(plain_processes(work, n, workers) for _ in range(2)) / n
        row = rows[key]
        speedups = "; ".join(
            f"{name} {fmt_ratio(ratio(zero[name], row.per_item[name]))}" for name in zero
        )
        detail = (
            f"{n:,} elements, spin of {work.iterations:,} loop steps; speed-up over 0 workers: "
            f"{speedups}; {workers} plain processes: "
            f"{fmt_ratio(ratio(one_process, ceiling))}"
        )
        checks = {
            f"{name} = the map here": outputs[name, workers] == expected
            for name in ("grainfn", "Grain")
        }
        per_item = {**row.per_item, CEILING: ceiling}
        rows[key] = dataclasses.replace(row, per_item=per_item, detail=detail, checks=checks)
    return list(rows.values())


def steps(quick: bool) -> list[Step]:
    return [Step("S1", functools.partial(scaling, QUICK if quick else DEFAULT))]


def targets(rows: dict[str, Row]) -> list[Target]:
    most = max(int(key.split()[1]) for key in rows)
    row = rows[f"S1 {plural(most, 'worker')}, steady state"]
    out = Target.checks(f"S1 {most} workers: output {{}}", row.checks)
    if most > 1:
        text = f"S1: grainfn with {most} workers >= 0.8x the speed of {most} plain processes"
        out.append(Target.at_least(text, row.ratio(CEILING, GRAINFN), 0.8))
    return out


if __name__ == "__main__":
    run_suite("scaling", __doc__ or "", steps, targets)
