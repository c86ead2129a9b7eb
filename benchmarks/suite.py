"""Run the benchmark suites and print one table of their ratios against Grain.

Run from the project root (a source checkout: the suites are not installed
with grainfn):

    python -m grainfn bench [--quick] [--suite NAME ...] [--markdown PATH]
    python -m benchmarks.suite [...]          (the same)

Each suite runs in its own Python process (`python -m benchmarks.NAME`, with
`--quick` if given), prints its own report as it goes, and writes its summary
with `--json` (see `benchmarks.report`). Then this script prints the combined
tables: every result row with a Grain or hand-loop figure (grainfn's figure,
Grain's, Grain's time / grainfn's, grainfn's time / the hand loop's, and the
status of the targets about that benchmark), and every target of every suite.
The exit status is 1 if a suite failed to run, else 0 (a target not met is a
finding, not a failure).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import MISSING, fmt_ratio, ratio
from benchmarks.report import GRAIN, HAND, Row, markdown_table

SUITES = (
    "import_time",
    "map_level",
    "streams",
    "facade",
    "array_record",
    "checkpoint",
    "parallel",
    "dataloader",
    "packing",
)
"""The suites, by module name under `benchmarks`, in the order they run."""

ROOT = Path(__file__).resolve().parents[1]
"""The source checkout holding the `benchmarks` package."""


@dataclasses.dataclass
class Outcome:
    """One suite's run: its exit status, its seconds, and its summary (None if it wrote none)."""

    name: str
    status: int
    seconds: float
    summary: dict[str, Any] | None


def argument_parser(prog: str = "python -m benchmarks.suite") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Runs the benchmark suites (each in its own process) and prints one "
        "table of their ratios against Grain and their targets. Run it from a source "
        "checkout.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="each suite's quick mode: small sizes, fewer runs"
    )
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help=f"run only this suite (repeatable); one of: {', '.join(SUITES)}",
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write the combined tables to PATH (Markdown)"
    )
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.suite") -> int:
    """Runs the chosen suites and prints the combined tables; returns the exit status."""
    parser = argument_parser(prog)
    args = parser.parse_args(argv)
    names = args.suite or list(SUITES)
    unknown = [name for name in names if name not in SUITES]
    if unknown:
        parser.error(
            f"unknown suite {', '.join(map(repr, unknown))}; the suites are: {', '.join(SUITES)}."
        )
    names = list(dict.fromkeys(names))  # each once, in the order given
    if args.markdown and not Path(args.markdown).resolve().parent.is_dir():
        parser.error(f"--markdown {args.markdown}: its directory does not exist.")
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="grainfn-bench-") as folder:
        for number, name in enumerate(names, start=1):
            print(f"\n=== [{number}/{len(names)}] benchmarks.{name} ===\n", flush=True)
            outcomes.append(run_suite(name, args.quick, Path(folder) / f"{name}.json"))
    text = combined_report(outcomes, args.quick)
    print("\n" + text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
        print(f"(written to {args.markdown})")
    return 0 if all(o.status == 0 and o.summary is not None for o in outcomes) else 1


def run_suite(name: str, quick: bool, summary_path: Path) -> Outcome:
    """Runs `python -m benchmarks.NAME` in a new process, its output going to ours."""
    command = [sys.executable, "-m", f"benchmarks.{name}", "--json", str(summary_path)]
    if quick:
        command.append("--quick")
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
    started = time.perf_counter()
    status = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    seconds = time.perf_counter() - started
    summary = None
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return Outcome(name, status, seconds, summary)


def grain_key(row: Row) -> str | None:
    """The key of Grain's figure in `row`: Grain default if measured, else the first Grain one.

    >>> grain_key(Row("x", {"grainfn": 1.0, "Grain threads=0": 2.0, "Grain default": 3.0}))
    'Grain default'
    >>> grain_key(Row("x", {"grainfn": 1.0, "Grain": 2.0})), grain_key(Row("x", {"grainfn": 1.0}))
    ('Grain', None)
    """
    if row.per_item.get(GRAIN) is not None:
        return GRAIN
    for key, value in row.per_item.items():
        if key.startswith("Grain") and value is not None:
            return key
    return None


def targets_of(row_name: str, targets: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets about a row: those whose name, up to its first ": ", starts the row's name.

    >>> targets = [{"name": "B1: >= 10x Grain", "met": True}, {"name": "B12: x", "met": False}]
    >>> [t["name"] for t in targets_of("B1 shuffle+map+batch(32)", targets)]
    ['B1: >= 10x Grain']
    """
    found = []
    for target in targets:
        prefix = target["name"].split(": ", 1)[0]
        rest = row_name[len(prefix) :]
        if ": " in target["name"] and row_name.startswith(prefix) and not rest[:1].isalnum():
            found.append(target)
    return found


def status_of(targets: Sequence[dict[str, Any]]) -> str:
    """'met', 'NOT met (k of n)', or '' without targets.

    >>> status_of([{"met": True}, {"met": False}]), status_of([{"met": True}]), status_of([])
    ('NOT met (1 of 2)', 'met', '')
    """
    if not targets:
        return ""
    missed = sum(not target["met"] for target in targets)
    return "met" if not missed else f"NOT met ({missed} of {len(targets)})"


def benchmark_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """The combined table's body: one line per result row with a Grain or hand-loop figure."""
    body = []
    for outcome in outcomes:
        if outcome.summary is None:
            continue
        targets = outcome.summary["targets"]
        for fields in outcome.summary["rows"]:
            row = Row.from_json(fields)
            key = grain_key(row)
            if key is None and row.per_item.get(HAND) is None:
                continue  # compares settings, not grainfn with Grain or a hand loop
            grain = MISSING if key is None else row.cell(key)
            if key not in (None, GRAIN, "Grain"):
                grain += f" ({key})"
            speedup = None if key is None else ratio(row.per_item[key], row.per_item[row.subject])
            body.append(
                [
                    outcome.name,
                    row.name,
                    row.cell(row.subject),
                    grain,
                    fmt_ratio(speedup),
                    fmt_ratio(row.over(HAND)),
                    status_of(targets_of(row.name, targets)),
                ]
            )
    return body


def combined_report(outcomes: Sequence[Outcome], quick: bool) -> str:
    """The combined tables and a closing line, as Markdown."""
    mode = " (--quick)" if quick else ""
    headers = [
        "Suite",
        "Benchmark",
        "grainfn",
        "Grain",
        "Grain / grainfn",
        "grainfn / hand loop",
        "Targets",
    ]
    lines = [f"## Benchmarks against Grain{mode}", ""]
    body = benchmark_rows(outcomes)
    lines.append(markdown_table(headers, body, left=2) if body else "(no result rows)")
    lines += [
        "",
        "Times as each suite reports them (per item, per run or per second); "
        "'Grain / grainfn' above 1 and 'grainfn / hand loop' below 1 favour grainfn. "
        "'Targets': the suite's targets named after the benchmark.",
        "",
        f"## Targets{mode}",
        "",
    ]
    targets = [
        [outcome.name, t["name"], t["measured"], "met" if t["met"] else "NOT met"]
        for outcome in outcomes
        if outcome.summary is not None
        for t in outcome.summary["targets"]
    ]
    lines.append(markdown_table(["Suite", "Target", "Measured", "Status"], targets, left=2))
    met = sum(row[3] == "met" for row in targets)
    failed = [o for o in outcomes if o.status != 0 or o.summary is None]
    total = sum(o.seconds for o in outcomes)
    lines += [
        "",
        f"{met} of {len(targets)} targets met; {len(outcomes) - len(failed)} of "
        f"{len(outcomes)} suites ran in {total:.0f} s.",
    ]
    for outcome in failed:
        lines.append(
            f"FAILED: benchmarks.{outcome.name} exited with status {outcome.status}"
            + ("" if outcome.summary is not None else " and wrote no summary")
            + " (its output is above)."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
