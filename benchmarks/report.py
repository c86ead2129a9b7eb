"""The report every benchmark script prints: result rows, tables, targets and the run around them.

A script builds a `Run` from its command line (`--quick`, `--markdown PATH`,
`--json PATH`), which prints the heading and the environment; runs its
measurements with `Run.section`; adds its tables (`results_table` over `Row`s,
or `markdown_table`) to `Run.report`; and ends with `Run.finish`, which adds the
`Targets` table, the wall time and the CPU time other processes used, and
writes the Markdown file. Tables are Markdown, so the same text goes to the
terminal and into `docs/performance.md`.

`--json PATH` also writes a machine-readable summary of the run: the `Row`s of
every `results_table` added to the report (a `Table` keeps them) and of every
`Report.add_rows` call (rows of a script that prints its own tables), the
targets and the wall time; `benchmarks.suite` (`python -m grainfn bench`) combines the
summaries of all the scripts into one table.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from benchmarks.common import (
    MISSING,
    CpuMonitor,
    fmt_micros,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    ratio,
    yes_no,
)

T = TypeVar("T")

# ---------------------------------------------------------------------------
# Result rows and the results table.

GRAINFN, GRAIN, GRAIN_SYNC, GRAIN_RANDOM, HAND = (
    "grainfn",
    "Grain default",
    "Grain threads=0",
    "Grain `ds[i]`",
    "hand loop",
)
"""The implementations most benchmarks compare; each is also its column's header."""

SAMPLED = "†"
"""Marks figures measured on a sample of the work and extrapolated."""


@dataclasses.dataclass
class Row:
    """One line of a results table: the time of each implementation for the same work.

    Attributes:
        name: The first cell.
        per_item: Seconds per item for each implementation, keyed by its
            column's header; None (or no entry) where an implementation does
            not apply or was not run. Keys that are not table columns may be
            used by the ratios.
        subject: The implementation the ratios are about (grainfn, or the facade).
        unit: How a time is shown: "s" (the time of all `items`), "us"
            (microseconds per item) or "rate" (indices per second).
        items: The number of items the work consists of.
        check: What was checked of the outputs, for the check column.
        passed: Whether those checks agreed (False only where a mismatch is
            reported rather than raised).
        sampled: Implementations whose figures are marked with `SAMPLED`.
        note: A line printed under the table.
    """

    name: str
    per_item: dict[str, float | None]
    subject: str = GRAINFN
    unit: str = "s"
    items: int = 1
    check: str = ""
    passed: bool = True
    sampled: frozenset[str] = frozenset()
    note: str = ""

    def cell(self, key: str) -> str:
        """Implementation `key`'s figure as the table shows it."""
        value = self.per_item.get(key)
        if value is None:
            return MISSING
        if self.unit == "s":
            text = fmt_seconds(value * self.items)
        elif self.unit == "rate":
            text = fmt_rate(1 / value, " idx/s")
        else:
            text = fmt_micros(value)
        return text + (SAMPLED if key in self.sampled else "")

    def speedup(self, key: str) -> float | None:
        """Implementation `key`'s time divided by the subject's (above 1: the subject is faster)."""
        return ratio(self.per_item.get(key), self.per_item.get(self.subject))

    def over(self, key: str) -> float | None:
        """The subject's time divided by implementation `key`'s (below 1: the subject is faster)."""
        return ratio(self.per_item.get(self.subject), self.per_item.get(key))

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-able values; `Row.from_json` rebuilds it."""
        fields = dataclasses.asdict(self)
        fields["per_item"] = {k: None if v is None else float(v) for k, v in self.per_item.items()}
        fields["sampled"] = sorted(self.sampled)
        return fields

    @staticmethod
    def from_json(fields: dict[str, Any]) -> Row:
        """The row `to_json` described."""
        return Row(**{**fields, "sampled": frozenset(fields.get("sampled", ()))})


class Table(str):
    """A Markdown table's text that also keeps the `Row`s it shows (from `results_table`).

    It is a `str`, so scripts print and add it as before; `Report.add` keeps
    its rows for the run's JSON summary.
    """

    rows: tuple[Row, ...]

    def __new__(cls, text: str, rows: Sequence[Row] = ()) -> Table:
        table = super().__new__(cls, text)
        table.rows = tuple(rows)
        return table


RatioColumn = tuple[str, Callable[[Row, str], float | None], str]
"""A ratio column of `results_table`: its header, `Row.speedup` or `Row.over`, and the key."""


def results_table(
    rows: Sequence[Row],
    columns: Sequence[str],
    ratios: Sequence[RatioColumn],
    *,
    check: str | None = None,
    first: str = "Benchmark",
) -> Table:
    """A table of rows: name, one column per implementation, the ratios, the checks.

    Args:
        rows: The rows, in order.
        columns: The implementations with a time column, by key (= header).
        ratios: The ratio columns, after the time columns; e.g.
            `("speed-up vs Grain default", Row.speedup, GRAIN)`.
        check: The header of a last column holding `Row.check`; None: no such column.
        first: The header of the first column.
    """
    headers = [first, *columns, *(header for header, _, _ in ratios)]
    body = []
    for row in rows:
        cells = [row.name, *(row.cell(key) for key in columns)]
        cells += [fmt_ratio(value(row, key)) for _, value, key in ratios]
        body.append(cells + ([row.check] if check is not None else []))
    return Table(markdown_table(headers + ([check] if check is not None else []), body), rows)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """A Markdown (GitHub) table, columns padded so it also reads well as plain text.

    The first `left` columns are left-aligned (names) and the others right-aligned (figures).
    """
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    for row in cells[1:]:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells for {len(headers)} headers")
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [":" + "-" * (w - 1) if i < left else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
    return "\n".join([line(cells[0]), "| " + " | ".join(rule) + " |", *map(line, cells[1:])])


# ---------------------------------------------------------------------------
# Targets.


@dataclasses.dataclass(frozen=True)
class Target:
    """One performance target: what it asks, what was measured, and whether it was met."""

    name: str
    measured: str
    met: bool


Fmt = Callable[[float | None], str]
"""How a target shows its measured value, e.g. `fmt_ratio` or `fmt_seconds`."""


class Targets:
    """The targets of a benchmark run, in the order they are added."""

    def __init__(self) -> None:
        self.items: list[Target] = []

    def add(self, name: str, measured: str, met: bool) -> None:
        """A target judged by the caller."""
        self.items.append(Target(name, measured, met))

    def at_least(self, name: str, value: float | None, limit: float, fmt: Fmt = fmt_ratio) -> None:
        """A target met if `value` is known and `value >= limit`; shown with `fmt`."""
        self.add(name, fmt(value), value is not None and value >= limit)

    def at_most(self, name: str, value: float | None, limit: float, fmt: Fmt = fmt_ratio) -> None:
        """A target met if `value` is known and `value <= limit`; shown with `fmt`."""
        self.add(name, fmt(value), value is not None and value <= limit)

    def check(self, name: str, ok: bool) -> None:
        """A target that is a yes / no check."""
        self.add(name, yes_no(ok), ok)

    def to_json(self) -> list[dict[str, Any]]:
        """The targets as JSON-able values: name, measured, met."""
        return [dataclasses.asdict(target) for target in self.items]

    def table(self) -> str:
        """The targets as a table: target, measured, "met" or "NOT met"."""
        return markdown_table(
            ["Target", "Measured", "Status"],
            [[t.name, t.measured, "met" if t.met else "NOT met"] for t in self.items],
        )


# ---------------------------------------------------------------------------
# The report and the run of a script.


def environment() -> dict[str, str]:
    """The machine and the versions that matter for the numbers."""

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores ({usable} usable)",
        "os": platform.platform(terse=True),
        "python": sys.version.split()[0],
        "numpy": version("numpy"),
        "grain": version("grain"),
        "grainfn": version("grainfn"),
    }


class Report:
    """Text printed as it is produced, and kept for an optional Markdown file.

    It opens with a heading and the environment the figures were measured in.
    The rows of every `Table` added, and those given to `add_rows`, are kept in
    `rows`, for the JSON summary.
    """

    def __init__(self, title: str) -> None:
        self.lines: list[str] = []
        self.rows: list[Row] = []
        self.environment = environment()
        self.add(f"## {title}")
        self.add()
        for key, value in self.environment.items():
            self.add(f"- {key}: {value}")
        self.add()

    def add(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)
        if isinstance(text, Table):
            self.rows.extend(text.rows)

    def add_rows(self, rows: Sequence[Row]) -> None:
        """Keeps `rows` for the JSON summary without printing anything.

        For a script that prints its own tables (`markdown_table`): the rows
        restate figures it measured, for the combined table of `benchmarks.suite`.
        """
        self.rows.extend(rows)

    def add_notes(self, notes: Sequence[str]) -> None:
        """Adds the notes below a table as a bulleted list, then a blank line."""
        for note in notes:
            self.add(f"- {note}")
        self.add()

    def write(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines).rstrip() + "\n")


def argument_parser(module: str, description: str) -> argparse.ArgumentParser:
    """The options every benchmark script takes: `--quick`, `--markdown PATH` and `--json PATH`.

    Args:
        module: The script's module, e.g. "benchmarks.map_level", for the usage line.
        description: One line saying what the script measures.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and fewer runs: a smoke run (< 60 s)"
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write the environment and tables to PATH"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write a machine-readable summary (result rows, targets) to PATH",
    )
    return parser


class Run:
    """One run of a benchmark script, from its command line to its written report.

    Creating it parses the command line, prints the report's heading and
    environment, and starts the clock and the CPU monitor. Then the script
    picks its sizes with `choose`, measures with `section`, calls
    `stop_clock` after the last measurement, adds its tables to `report` and
    ends with `finish`.
    """

    def __init__(self, module: str, doc: str, title: str, argv: list[str] | None = None) -> None:
        """Parses `argv` (default: the command line) and opens the report.

        Args:
            module: The script's module, e.g. "benchmarks.map_level".
            doc: The script's docstring; its first line is the `--help` description.
            title: The report's heading; " (--quick)" is appended for a quick run.
            argv: The arguments, without the program name.
        """
        args = argument_parser(module, doc.splitlines()[0]).parse_args(argv)
        self.module = module
        self.title = title
        self.quick: bool = args.quick
        self.markdown: str | None = args.markdown
        self.json: str | None = args.json
        self.report = Report(f"{title}{' (--quick)' if self.quick else ''}")
        self.monitor = CpuMonitor().start()
        self.started = time.perf_counter()
        self.elapsed: float | None = None
        self.sections = 0

    def choose(self, *, default: T, quick: T) -> T:
        """`quick` for a `--quick` run, else `default` (a configuration or a single size)."""
        return quick if self.quick else default

    def section(self, name: str, measure: Callable[[], T]) -> T:
        """Runs `measure()`, prints how long it took, and returns its result."""
        started = time.perf_counter()
        result = measure()
        print(f"  ({name} took {time.perf_counter() - started:.0f} s)", flush=True)
        self.sections += 1
        return result

    def stop_clock(self) -> None:
        """Ends the measured part of the run; a blank line follows any sections' progress lines."""
        self.elapsed = time.perf_counter() - self.started
        if self.sections:
            print()

    def finish(self, targets: Targets) -> None:
        """Adds the targets, the wall time and other processes' CPU time; writes the file."""
        if self.elapsed is None:
            self.stop_clock()
        self.report.add("### Targets")
        self.report.add()
        self.report.add(targets.table())
        self.report.add()
        self.report.add(f"Total wall time of the run: {self.elapsed:.0f} s.")
        other = self.monitor.other_cpu_seconds()
        if other is not None:
            self.report.add(
                f"Other processes used {other[0]:.0f} CPU-seconds meanwhile "
                f"({other[0] / other[1]:.2f} of the {os.cpu_count()} cores on average)."
            )
        if self.markdown:
            self.report.write(self.markdown)
            print(f"(written to {self.markdown})")
        if self.json:
            with open(self.json, "w", encoding="utf-8") as f:
                json.dump(self.summary(targets), f, indent=1)

    def summary(self, targets: Targets) -> dict[str, Any]:
        """The run as JSON-able values: what `--json` writes.

        Keys: "module", "title", "quick", "environment", "rows" (`Row.to_json`
        of every `results_table` row added to the report, and of every row
        given to `Report.add_rows`), "targets"
        (`Targets.to_json`) and "wall_seconds".
        """
        return {
            "module": self.module,
            "title": self.title,
            "quick": self.quick,
            "environment": self.report.environment,
            "rows": [row.to_json() for row in self.report.rows],
            "targets": targets.to_json(),
            "wall_seconds": self.elapsed,
        }
