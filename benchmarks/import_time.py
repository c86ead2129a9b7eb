"""How long `import grainfn` takes in a fresh interpreter, and which heavy modules it loads.

Run from the project root:

    python -m benchmarks.import_time [--quick] [--markdown PATH]

Each sample starts a new Python process that times `import grainfn` alone
(`python -c`, interpreter start-up excluded); the median of the samples is
compared with the 0.3 s budget, next to `import grain` for scale.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from benchmarks.common import fmt_seconds
from benchmarks.report import GRAINFN, Row, Run, Targets, markdown_table

HEAVY = ("jax", "jaxlib", "orbax", "array_record", "tensorstore", "grain")
PROBE = """
import json, sys, time
start = time.perf_counter()
import {module}
elapsed = time.perf_counter() - start
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps([elapsed, heavy]))
"""


def sample(module: str) -> tuple[float, list[str]]:
    code = PROBE.format(module=module, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed, heavy = json.loads(out.stdout)
    return elapsed, heavy


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.import_time", __doc__, "import time", argv)
    count = run.choose(default=15, quick=5)
    rows, ours = [], 0.0
    medians: dict[str, float] = {}
    for module in ("grainfn", "grain"):
        samples = [sample(module) for _ in range(count)]
        times = [t for t, _ in samples]
        heavy = samples[0][1]
        median = statistics.median(times)
        medians[module] = median
        if module == "grainfn":
            ours = median
            loaded = [m for m in heavy if m != "grain"]
        else:
            loaded = heavy
        rows.append(
            [
                f"import {module}",
                fmt_seconds(median),
                fmt_seconds(min(times)),
                ", ".join(loaded) or "none",
            ]
        )
    run.stop_clock()
    run.report.add(markdown_table(["Statement", "median", "best", "heavy modules loaded"], rows))
    run.report.add()
    run.report.add_rows(
        [
            Row(
                f"`import grainfn` vs `import grain` (median of {count})",
                {GRAINFN: medians["grainfn"], "Grain": medians["grain"]},
            )
        ]
    )
    targets = Targets()
    targets.at_most(f"`import grainfn` <= 0.3 s (median of {count})", ours, 0.3, fmt_seconds)
    run.finish(targets)


if __name__ == "__main__":
    main()
