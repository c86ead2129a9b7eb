"""Process-pool scaling: `mp_prefetch` with as many workers as the machine has cores for.

S1: a ~2 ms map with 0 to 16 workers (up to the core count), beside plain processes (the ceiling).
Grain is imported only where used: spawned workers re-import this module.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from benchmarks import harness as h
from benchmarks import workers as wk
from benchmarks.run import run_suite

COUNTS = (0, 1, 2, 4, 8, 16)
CEILING = "processes"  # the per-item figure of the plain processes: the machine's ceiling


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    per_worker: int = 50  # elements per worker at the largest count
    repeats: int = 2  # timed runs per case
    warmup_n: int = 8  # elements of the small pipelines every case is warmed up on


DEFAULT, QUICK = Config(), Config(per_worker=40, repeats=1, warmup_n=4)


def worker_counts(cores: int | None) -> tuple[int, ...]:
    """The counts of COUNTS this machine has cores for (0 and 1 always)."""
    return tuple(w for w in COUNTS if w <= max(1, cores or 1))


def scaling(c: Config) -> list[h.Row]:
    counts = worker_counts(os.cpu_count())
    work, n = wk.calibrate(0.002), c.per_worker * max(counts)

    def build(lib: Any, size: int, workers: int) -> Any:
        return wk.map_pipeline(lib, size, work, workers, 1)

    timing = (n, c.warmup_n, c.repeats, counts)
    reads, outputs = wk.time_workers(wk.libraries(), build, wk.timed_read, *timing)
    expected = [work(x) for x in range(n)]
    h.require(outputs[h.GRAINFN, max(counts)] == expected, "S1: grainfn's output is not the map's")
    rows = {r.key: r for r in wk.worker_rows("S1", reads, n) if r.key.endswith("steady state")}
    zero = rows["S1 0 workers, steady state"].per_item
    one_process = min(wk.plain_processes(work, n, 1) for _ in range(2)) / n
    for workers in counts[1:]:
        key = f"S1 {wk.plural(workers, 'worker')}, steady state"
        ceiling = min(wk.plain_processes(work, n, workers) for _ in range(2)) / n
        row = rows[key]
        speedups = "; ".join(
            f"{name} {h.fmt_ratio(h.ratio(zero[name], row.per_item[name]))}" for name in zero
        )
        detail = (
            f"{n:,} elements, spin of {work.iterations:,} loop steps; speed-up over 0 workers: "
            f"{speedups}; {workers} plain processes: {h.fmt_ratio(h.ratio(one_process, ceiling))}"
        )
        checks = {f"{k} = the map here": outputs[k, workers] == expected for k in wk.LIBRARIES}
        per_item = {**row.per_item, CEILING: ceiling}
        rows[key] = dataclasses.replace(row, per_item=per_item, detail=detail, checks=checks)
    return list(rows.values())


def steps(c: Config) -> list[h.Step]:
    return [h.Step("S1", functools.partial(scaling, c))]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    most = max(int(key.split()[1]) for key in rows)
    row = rows[f"S1 {wk.plural(most, 'worker')}, steady state"]
    out = h.Target.checks(f"S1 {most} workers: output {{}}", row.checks)
    if most > 1:
        text = f"S1: grainfn with {most} workers >= 0.8x the speed of {most} plain processes"
        out.append(h.Target.at_least(text, row.ratio(CEILING, h.GRAINFN), 0.8))
    return out


if __name__ == "__main__":
    run_suite("scaling", __doc__ or "", steps, targets, DEFAULT, QUICK)
