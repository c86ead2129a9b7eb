"""The benchmark harness, the running side: suites run and printed, and the `bench` command.

`run_suite` runs one suite in this process (`python -m benchmarks.NAME [--quick] [--check]
[--markdown PATH] [--json PATH]`); `main` runs several, each in its own process (`python -m
grainfn bench`), with a progress bar per suite, then prints one table and the targets summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import HAND, SAMPLED, C, Row, Step, Target, fmt_ratio, require, status

SUITES = (  # the suites, by module name under `benchmarks`, in the order they run
    *("import_time", "map_level", "streams", "facade", "array_record"),
    *("checkpoint", "parallel", "scaling", "dataloader", "big_source", "packing", "jax_device"),
    *("elastic", "ray_cluster"),
)
ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100  # the most characters a line of the printed table has


# One suite, in this process.
@dataclasses.dataclass(frozen=True)
class SuiteReport:
    """A suite's run (what `--json` writes): its rows and targets, or why it failed."""

    suite: str
    quick: bool
    seconds: float
    rows: tuple[Row, ...] = ()
    targets: tuple[Target, ...] = ()
    other_cpu: float | None = None  # CPU seconds other processes used meanwhile
    status: int = 0
    log: str = ""

    @staticmethod
    def from_json(fields: dict[str, Any]) -> SuiteReport:
        rows = tuple(Row(**{**row, "sampled": tuple(row["sampled"])}) for row in fields["rows"])
        targets = tuple(Target(**target) for target in fields["targets"])
        return SuiteReport(**{**fields, "rows": rows, "targets": targets})


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The options of the suites and of `main`: `--quick`, `--markdown PATH` and `--check`."""
    out = argparse.ArgumentParser(prog=prog, description=description)
    out.add_argument("--quick", action="store_true", help="small sizes, fewer runs: a smoke run")
    out.add_argument("--markdown", metavar="PATH", help="also write the long report to PATH")
    out.add_argument("--check", action="store_true", help="exit with 1 if a target is NOT met")
    return out


def cpu_seconds() -> tuple[float, float] | None:
    """(Busy CPU seconds of the machine, of this process and its children); Linux only."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), sum(os.times()[:4])


def run_suite(
    name: str,
    doc: str,
    steps: Callable[[C], list[Step]],
    targets: Callable[[dict[str, Row]], list[Target]],
    default: C,
    quick: C,
    argv: list[str] | None = None,
) -> None:
    """`python -m benchmarks.NAME`: measures the steps of `default` (`quick` with --quick), prints
    the table, writes the files; `doc`'s first line is `--help`'s, `argv` has no program name."""
    options = parser(f"python -m benchmarks.{name}", doc.split("\n")[0])
    options.add_argument("--json", metavar="PATH", help="also write the rows and targets to PATH")
    options.add_argument("--events", help=argparse.SUPPRESS)  # progress file for `main`
    args = options.parse_args(argv)
    bar, started, cpu = ProgressBar("[1/1]", name), time.perf_counter(), cpu_seconds()
    todo = steps(quick if args.quick else default)

    def progress(done: int, step: str) -> None:
        if args.events:
            with open(args.events, "a", encoding="utf-8") as f:
                f.write(f"{done} {len(todo)} {step}\n")
        else:
            bar.show(done, len(todo), step, time.perf_counter() - started)

    rows: list[Row] = []
    for done, step in enumerate(todo):
        progress(done, step.name)
        rows += step.measure()
    progress(len(todo), "done")
    bar.close()
    seconds, end = time.perf_counter() - started, cpu_seconds()
    other = None if cpu is None or end is None else max(0.0, end[0] - cpu[0] - end[1] + cpu[1])
    by_key = {row.key: row for row in rows}
    require(len(by_key) == len(rows), f"{name}: two rows with the same key")
    report = SuiteReport(name, args.quick, seconds, tuple(rows), tuple(targets(by_key)), other)
    if args.json:
        Path(args.json).write_text(json.dumps(dataclasses.asdict(report), indent=1), "utf-8")
    print(summary_text([report]))
    if args.markdown:
        Path(args.markdown).write_text(markdown_text([report]), "utf-8")
    if args.check and not all(t.met for t in report.targets):
        sys.exit(1)


class ProgressBar:
    """A suite's progress line on stderr, redrawn in place: `[3/9] parallel  ████░░░░ 2/4 P3`."""

    def __init__(self, position: str, suite: str) -> None:
        self.position, self.suite, self.tty, self.last = position, suite, sys.stderr.isatty(), ""

    def show(self, done: int, total: int, step: str, seconds: float) -> None:
        filled = 16 * done // max(total, 1)
        bar = "█" * filled + "░" * (16 - filled)
        head = f"{self.position} {self.suite:<12} {bar} {done}/{total or '?'} {step}"[: WIDTH - 9]
        if self.tty:
            sys.stderr.write(f"\r{head}  {seconds:4.0f} s\x1b[K")
            sys.stderr.flush()
        elif head != self.last:
            print(f"{head}  {seconds:.0f} s", file=sys.stderr, flush=True)
        self.last = head

    def close(self) -> None:
        if self.tty and self.last:
            sys.stderr.write("\n")


# Tables.
def table(headers: Sequence[str], body: Sequence[Sequence[str]], left: int, markdown: bool) -> str:
    """A table, the first `left` columns left-aligned: Markdown, or plain text within `WIDTH`."""
    cells = [list(headers), *(list(row) for row in body)]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(headers))]
    if markdown:
        rule = [
            ":" + "-" * (w - 1) if i < left else "-" * (w - 1) + ":" for i, w in enumerate(widths)
        ]
    else:
        widths[1] = max(8, min(widths[1], WIDTH - sum(widths) + widths[1] - 2 * len(widths) + 2))
        rule = ["-" * w for w in widths]
    lines = []
    for row in [cells[0], rule, *cells[1:]]:
        row[1] = row[1] if markdown or len(row[1]) <= widths[1] else row[1][: widths[1] - 1] + "…"
        padded = [
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append("| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip())
    return "\n".join(lines)


def ratio_cells(row: Row, report: SuiteReport) -> list[str]:
    """Grain's time / the subject's, the subject's / the hand loop's, and the target status."""
    return [fmt_ratio(row.grain_speedup()), fmt_ratio(row.over(HAND)), status(row, report.targets)]


def closing_line(reports: Sequence[SuiteReport]) -> str:
    """'N of M targets met; K of L suites ran in S s.'"""
    targets = [t.met for r in reports for t in r.targets]
    ran, seconds = sum(r.status == 0 for r in reports), sum(r.seconds for r in reports)
    return (
        f"{sum(targets)} of {len(targets)} targets met; "
        f"{ran} of {len(reports)} suites ran in {seconds:.0f} s."
    )


def summary_text(reports: Sequence[SuiteReport]) -> str:
    """The printed summary: one table of all rows, the closing line, what missed or failed."""
    headers = ["Suite", "Benchmark", "grainfn", "Grain/grainfn", "grainfn/hand", "Targets"]
    body = [
        [r.suite, row.name, row.cell(row.subject), *ratio_cells(row, r)]
        for r in reports
        for row in r.rows
    ]
    lines = [table(headers, body, 2, markdown=False), "", closing_line(reports)]
    for r in reports:
        lines += [
            f"NOT met: {r.suite}: {t.text} ({t.measured})"[:WIDTH] for t in r.targets if not t.met
        ]
        if r.status != 0:
            lines.append(
                f"FAILED: benchmarks.{r.suite} exited with status {r.status}; its output ends:"
            )
            lines += ["    " + line[: WIDTH - 4] for line in r.log.splitlines()[-12:]]
    return "\n".join(lines)


def markdown_text(reports: Sequence[SuiteReport]) -> str:
    """The long report: every figure of every row, every target with its measured value."""
    quick = " (--quick)" if any(r.quick for r in reports) else ""
    lines = [f"# grainfn benchmarks{quick}", "", *environment(), "", closing_line(reports), ""]
    for r in reports:
        lines += [f"## {r.suite}", ""]
        if r.status != 0:
            lines += [f"FAILED with status {r.status}:", "", "```", r.log[-3000:], "```", ""]
            continue
        cpu = "" if r.other_cpu is None else f"; other processes used {r.other_cpu:.0f} CPU-seconds"
        columns = list(dict.fromkeys(key for row in r.rows for key in row.per_item))
        headers = ["Benchmark", *columns, "Grain / grainfn", "grainfn / hand loop", "Targets"]
        body = [[row.name, *map(row.cell, columns), *ratio_cells(row, r)] for row in r.rows]
        lines += [f"Ran in {r.seconds:.0f} s{cpu}.", "", table(headers, body, 1, markdown=True), ""]
        for row in r.rows:
            checks = "; ".join(
                f"{name}: {'yes' if ok else 'NO'}" for name, ok in row.checks.items()
            )
            text = " ".join(part for part in (row.detail, checks and f"Checks: {checks}.") if part)
            lines += [f"- {row.name}: {text}"] if text else []
        if any(row.sampled for row in r.rows):
            lines.append(f"- {SAMPLED}: measured on a sample of the work and extrapolated.")
        targets = [[t.text, t.measured, "met" if t.met else "NOT met"] for t in r.targets]
        lines += ["", table(["Target", "Measured", "Status"], targets, 1, markdown=True), ""]
    return "\n".join(lines)


def environment() -> list[str]:
    """The machine and the versions that matter for the figures, as Markdown list items."""

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return [
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU cores ({usable} usable)",
        f"- os: {platform.platform(terse=True)}; python {sys.version.split()[0]}",
        *(f"- {package}: {version(package)}" for package in ("numpy", "grain", "grainfn")),
    ]


# `python -m grainfn bench`: the suites, each in its own process.
def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.run") -> int:
    """Runs the chosen suites, prints one table and the targets summary; returns the exit status."""
    options = parser(
        prog,
        "Runs the benchmark suites, each in its own process, then prints one "
        "table of their figures, ratios and targets. Run it from a source checkout.",
    )
    options.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help=f"run only this suite (repeatable): {', '.join(SUITES)}",
    )
    args = options.parse_args(argv)
    names = list(dict.fromkeys(args.suite or SUITES))
    unknown = ", ".join(repr(name) for name in names if name not in SUITES)
    if unknown:
        options.error(f"unknown suite {unknown}; the suites are: {', '.join(SUITES)}.")
    if args.markdown and not Path(args.markdown).resolve().parent.is_dir():
        options.error(f"--markdown {args.markdown}: its directory does not exist.")
    with tempfile.TemporaryDirectory(prefix="grainfn-bench-") as folder:
        positions = [f"[{number}/{len(names)}]" for number in range(1, len(names) + 1)]
        reports = [
            run_process(name, args.quick, at, Path(folder)) for name, at in zip(names, positions)
        ]
    print(summary_text(reports))
    if args.markdown:
        Path(args.markdown).write_text(markdown_text(reports), "utf-8")
        print(f"(the long report is in {args.markdown})")
    missed = args.check and not all(t.met for r in reports for t in r.targets)
    return 1 if missed or any(r.status != 0 for r in reports) else 0


def run_process(name: str, quick: bool, position: str, folder: Path) -> SuiteReport:
    """Runs `python -m benchmarks.NAME` in a new process, showing its progress bar."""
    summary, events, log = (folder / f"{name}.{end}" for end in ("json", "events", "log"))
    command = [sys.executable, "-m", f"benchmarks.{name}", "--json", str(summary)]
    command += ["--events", str(events), *(["--quick"] if quick else [])]
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
    bar, started = ProgressBar(position, name), time.perf_counter()
    with open(log, "w+", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        while process.poll() is None:
            bar.show(*last_event(events), time.perf_counter() - started)
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        bar.show(*last_event(events, "FAILED" if process.returncode else "done"), seconds)
        bar.close()
        out.seek(0)
        text = out.read()
    if process.returncode == 0 and summary.is_file():
        report = SuiteReport.from_json(json.loads(summary.read_text("utf-8")))
        return dataclasses.replace(report, seconds=seconds)
    return SuiteReport(name, quick, seconds, status=process.returncode or 1, log=text)


def last_event(path: Path, end: str | None = None) -> tuple[int, int, str]:
    """(Steps done, steps in all, the step running, or `end`) from a `--events` file."""
    try:
        done, total, step = path.read_text("utf-8").splitlines()[-1].split(" ", 2)
        return int(done), int(total), end or step
    except (OSError, IndexError, ValueError):
        return 0, 0, end or "starting"


if __name__ == "__main__":
    sys.exit(main())
