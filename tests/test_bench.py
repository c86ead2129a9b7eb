"""`python -m grainfn bench` and the machine-readable summaries of the benchmark scripts."""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import grainfn.__main__ as cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite():
    module = cli.benchmark_suite()  # also puts the source checkout on sys.path
    assert module is not None
    return module


def test_bench_runs_a_suite_and_prints_the_combined_table(tmp_path) -> None:
    markdown = tmp_path / "combined.md"
    command = [sys.executable, "-m", "grainfn", "bench", "--quick", "--suite", "array_record"]
    result = subprocess.run(
        [*command, "--markdown", str(markdown)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "=== [1/1] benchmarks.array_record ===" in out  # the suite's own report
    combined = out[out.index("## Benchmarks against Grain (--quick)") :]
    benchmarks, targets = combined.split("## Targets (--quick)")
    assert "| Suite" in benchmarks and "| Grain / grainfn |" in benchmarks
    rows = [line for line in benchmarks.splitlines() if line.startswith("| array_record ")]
    assert len(rows) >= 3
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert re.fullmatch(r"[\d.]+x", cells[4]), row  # Grain's time / grainfn's
        assert re.fullmatch(r"met|NOT met \(\d+ of \d+\)", cells[6]), row
    assert "| array_record | Pipeline: grainfn batches = Grain's" in targets
    assert re.search(r"\d+ of \d+ targets met; 1 of 1 suites ran in \d+ s\.", targets)
    assert markdown.read_text().startswith("## Benchmarks against Grain (--quick)")


def test_bench_refuses_an_unknown_suite() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "grainfn", "bench", "--suite", "streams", "--suite", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "unknown suite 'nope'; the suites are: import_time, map_level, streams" in result.stderr
    assert "===" not in result.stdout  # nothing ran


def test_bench_help_lists_the_suites(suite, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m grainfn bench" in out
    for name in suite.SUITES:
        assert name in out


def test_bench_refuses_a_markdown_path_in_a_missing_directory(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--suite", "import_time", "--markdown", str(tmp_path / "no" / "x.md")])
    assert exit_info.value.code == 2
    assert "its directory does not exist" in capsys.readouterr().err


def test_bench_outside_a_source_checkout_says_where_to_run_it(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cli, "source_roots", lambda: [tmp_path])
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "the benchmark suites were not found" in err
    assert "run the command from the root of a source checkout" in err


def test_every_benchmark_script_is_a_suite(suite) -> None:
    scripts = {
        path.stem
        for path in (ROOT / "benchmarks").glob("*.py")
        if "\ndef main(" in path.read_text() and path.stem != "suite"
    }
    assert scripts == set(suite.SUITES)


def test_suite_helpers_doctests(suite) -> None:
    result = doctest.testmod(suite, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4
    assert result.failed == 0


def test_json_summary_keeps_result_rows_and_targets(suite, tmp_path, capsys) -> None:
    from benchmarks.report import GRAIN, HAND, Row, Run, Table, Targets, results_table

    path = tmp_path / "summary.json"
    run = Run("benchmarks.fake", "A fake script.", "fake", ["--quick", "--json", str(path)])
    row = Row("B9 fake work", {"grainfn": 1e-3, GRAIN: 4e-3, HAND: 5e-4})
    table = results_table([row], ["grainfn", GRAIN, HAND], [("vs Grain", Row.speedup, GRAIN)])
    assert isinstance(table, Table) and table.rows == (row,)
    run.report.add(table)
    run.report.add(f"{table}")  # plain text: not kept twice
    targets = Targets()
    targets.at_least("B9: >= 3x Grain", row.speedup(GRAIN), 3)
    targets.check("B9: outputs equal", False)
    run.finish(targets)
    summary = json.loads(path.read_text())
    assert summary["module"] == "benchmarks.fake" and summary["quick"] is True
    assert [Row.from_json(fields) for fields in summary["rows"]] == [row]
    assert summary["targets"] == [
        {"name": "B9: >= 3x Grain", "measured": "4x", "met": True},
        {"name": "B9: outputs equal", "measured": "no", "met": False},
    ]
    outcome = suite.Outcome("fake", 0, 1.0, summary)
    failed = suite.Outcome("broken", 1, 2.0, None)
    text = suite.combined_report([outcome, failed], quick=True)
    capsys.readouterr()
    line = next(line for line in text.splitlines() if line.startswith("| fake "))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells == ["fake", "B9 fake work", "1 ms", "4 ms", "4x", "2x", "NOT met (1 of 2)"]
    assert "1 of 2 targets met; 1 of 2 suites ran in 3 s." in text
    assert "FAILED: benchmarks.broken exited with status 1 and wrote no summary" in text


def test_add_rows_keeps_rows_for_the_summary_without_printing(suite, tmp_path, capsys) -> None:
    from benchmarks.report import Row, Run, Targets, markdown_table

    path = tmp_path / "summary.json"
    run = Run("benchmarks.fake", "A fake script.", "fake", ["--json", str(path)])
    run.report.add(markdown_table(["Call", "grainfn", "Grain"], [["D9 work", "2 µs", "6 µs"]]))
    assert run.report.rows == []  # a hand-made table keeps no rows
    capsys.readouterr()
    lines = list(run.report.lines)
    row = Row("D9 work", {"grainfn": 2e-6, "Grain": 6e-6}, unit="us")
    run.report.add_rows([row])
    assert capsys.readouterr().out == "" and run.report.lines == lines  # nothing printed
    targets = Targets()
    targets.at_least("D9: >= 2x Grain", row.speedup("Grain"), 2)
    run.finish(targets)
    summary = json.loads(path.read_text())
    assert [Row.from_json(fields) for fields in summary["rows"]] == [row]
    body = suite.benchmark_rows([suite.Outcome("fake", 0, 1.0, summary)])
    assert body == [["fake", "D9 work", "2 µs", "6 µs", "3x", "n/a", "met"]]


def test_rows_without_grain_or_hand_loop_are_left_out(suite) -> None:
    from benchmarks.report import Row

    settings = Row("grainfn", {"threads=0": 2.0, "threads=16": 1.0}, subject="threads=16")
    summary = {"rows": [settings.to_json()], "targets": []}
    assert suite.benchmark_rows([suite.Outcome("x", 0, 1.0, summary)]) == []
