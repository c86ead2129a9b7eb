"""How long `import grainfn` takes in a fresh interpreter, and which heavy modules it loads.

The median of 15 fresh imports, bytecode cached (5 with --quick), against 0.3 s; Grain's for scale.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys

from benchmarks import harness as h
from benchmarks.run import run_suite

HEAVY = ("jax", "jaxlib", "orbax", "array_record", "tensorstore", "pyarrow", "ray", "grain")
PROBE = """
import json, sys, time
sys.dont_write_bytecode = False  # even under PYTHONDONTWRITEBYTECODE: the first run writes it
start = time.perf_counter()
import {module}
elapsed = time.perf_counter() - start
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps([elapsed, heavy]))
"""


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    samples: int = 15  # new interpreters per module


DEFAULT, QUICK = Config(), Config(samples=5)


def sample(module: str) -> tuple[float, list[str]]:
    """Seconds of `import module` in a new interpreter, and the heavy modules it loaded."""
    code = PROBE.format(module=module, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed, heavy = json.loads(out.stdout)
    return elapsed, heavy


def import_times(count: int) -> list[h.Row]:
    samples = {m: [sample(m) for _ in range(count + 1)][1:] for m in ("grainfn", "grain")}
    times = {module: [t for t, _ in runs] for module, runs in samples.items()}
    first = {module: runs[0][1] for module, runs in samples.items()}
    loaded = {"grainfn": [m for m in first["grainfn"] if m != "grain"], "grain": first["grain"]}
    detail = "; ".join(
        f"`import {module}`: best {h.fmt_seconds(min(times[module]))}, heavy modules loaded: "
        f"{', '.join(loaded[module]) or 'none'}"
        for module in times
    )
    figures = {
        h.GRAINFN: statistics.median(times["grainfn"]),
        "Grain": statistics.median(times["grain"]),
    }
    title = f"(median of {count})"
    return [h.Row("`import grainfn`", title, figures, items=count, unit="us", detail=detail)]


def steps(c: Config) -> list[h.Step]:
    return [h.Step("import", lambda: import_times(c.samples))]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    row = rows["`import grainfn`"]  # seconds per import, the median of `items` samples
    text = f"`import grainfn` <= 0.3 s (median of {row.items})"
    return [h.Target.at_most(text, row.per_item[h.GRAINFN], 0.3, h.fmt_seconds)]


if __name__ == "__main__":
    run_suite("import_time", __doc__ or "", steps, targets, DEFAULT, QUICK)
