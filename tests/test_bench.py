"""`python -m grainfn bench`, the benchmark harness and runner, and the suites' summaries."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import grainfn.__main__ as cli

from support.module_sizes import code_lines

ROOT = Path(__file__).resolve().parents[1]
HEADER = re.compile(r"Suite +Benchmark +grainfn +Grain/grainfn +grainfn/hand +Targets")
FIGURE = r"[\d.e+]+ (s|ms|µs|[kMG]? ?idx/s)|n/a"
RATIO = r"[\d.e+]+x|n/a"
STATUS = r"met|NOT met|\d+/\d+ met|"
LINE_BUDGET = 3_800
"""The most lines `benchmarks/*.py` may have together, blank lines and docstrings included:
the suites came down from 4,198 to 3,750 without dropping a measurement (issue 33), and
this keeps them there."""
CODE_LINE_BUDGET = 3_000
"""The most lines of code (not blank, comment or docstring) they may have together: issue
33's "stays under 3,000 lines", which they were (2,960) when it was filed."""


@pytest.fixture(scope="module")
def runner():
    module = cli.benchmark_runner()  # also puts the source checkout on sys.path
    assert module is not None
    return module


@pytest.fixture(scope="module")
def harness(runner):
    return importlib.import_module("benchmarks.harness")


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def table_cells(line: str) -> list[str]:
    """The cells of a line of the printed table (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.slow
def test_bench_prints_one_table_a_summary_and_writes_the_markdown(tmp_path) -> None:
    markdown = tmp_path / "bench.md"
    suites = ["--suite", "import_time", "--suite", "array_record"]
    result = run("grainfn", "bench", "--quick", *suites, "--markdown", str(markdown))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout.splitlines()
    assert out[-1] == f"(the long report is in {markdown})"  # a path, as long as it is
    assert all(len(line) <= 100 for line in out[:-1]), max(out[:-1], key=len)
    assert sum(bool(HEADER.fullmatch(line)) for line in out) == 1  # one table, printed once
    assert HEADER.fullmatch(out[0]) and set(out[1]) == {"-", " "}
    rows = [table_cells(line) for line in out[2 : out.index("")]]
    assert [cells[0] for cells in rows].count("import_time") == 1
    assert [cells[0] for cells in rows].count("array_record") == 3
    for cells in rows:
        assert len(cells) in (5, 6), cells  # the target status is empty for a row without targets
        assert re.fullmatch(FIGURE, cells[2]), cells
        assert re.fullmatch(RATIO, cells[3]) and re.fullmatch(RATIO, cells[4]), cells
        assert re.fullmatch(STATUS, cells[5] if len(cells) == 6 else ""), cells
    pipeline = next(cells for cells in rows if cells[1].startswith("Pipeline"))
    assert pipeline[3] != "n/a" and pipeline[4] != "n/a"  # against Grain and the hand loop
    closing = out.index("") + 1
    summary = re.fullmatch(r"(\d+) of 5 targets met; 2 of 2 suites ran in \d+ s\.", out[closing])
    assert summary, out[closing]
    missed = out[closing + 1 : -1]
    assert len(missed) == 5 - int(summary.group(1))
    assert all(
        line.startswith(("NOT met: import_time: ", "NOT met: array_record: ")) for line in missed
    )
    assert out[-1] == f"(the long report is in {markdown})"
    progress = result.stderr.splitlines()
    assert any(re.match(r"\[1/2\] import_time +█+ 1/1 done +\d+ s", line) for line in progress)
    assert any(re.match(r"\[2/2\] array_record +[█░]+ 1/3 getitems", line) for line in progress)
    assert any(re.match(r"\[2/2\] array_record +█+ 3/3 done", line) for line in progress)

    text = markdown.read_text()
    assert text.startswith("# grainfn benchmarks (--quick)\n\n- machine: ")
    assert re.search(r"^\d+ of 5 targets met; 2 of 2 suites ran in \d+ s\.$", text, re.M)
    section = text[text.index("## array_record") :]
    header = "| Benchmark | grainfn | grainfn parallel_reads=False | Grain default | hand loop "
    assert re.sub(r" +", " ", section.splitlines()[4]).startswith(header)
    assert re.search(
        r"^\| Pipeline: grainfn >= 1\.5x Grain +\| +[\d.]+x \| +(met|NOT met) \|$", section, re.M
    )
    assert re.search(r"^\| Pipeline: grainfn batches = Grain's +\| +yes \| +met \|$", section, re.M)
    assert "Checks: grainfn batches = Grain's: yes." in section
    assert "`import grainfn` <= 0.3 s (median of 5)" in text


@pytest.mark.slow
def test_a_suite_alone_writes_its_summary(tmp_path) -> None:
    summary_path = tmp_path / "summary.json"
    result = run("benchmarks.import_time", "--quick", "--json", str(summary_path), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert HEADER.match(result.stdout.splitlines()[0])
    assert "[1/1] import_time" in result.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["suite"] == "import_time" and summary["quick"] is True and summary["status"] == 0
    assert summary["seconds"] > 0
    [row] = summary["rows"]
    assert row["key"] == "`import grainfn`" and row["title"] == "(median of 5)"
    assert set(row["per_item"]) == {"grainfn", "Grain"} and 0 < row["per_item"]["grainfn"] < 10
    [target] = summary["targets"]
    assert target["text"] == "`import grainfn` <= 0.3 s (median of 5)"
    assert re.fullmatch(r"[\d.]+ m?s", target["measured"]) and isinstance(target["met"], bool)


def test_bench_refuses_an_unknown_suite() -> None:
    result = run("grainfn", "bench", "--suite", "streams", "--suite", "nope", timeout=120)
    assert result.returncode == 2
    assert "unknown suite 'nope'; the suites are: import_time, map_level, streams" in result.stderr
    assert result.stdout == "" and "[1/" not in result.stderr  # nothing ran


def test_bench_help_lists_the_suites(runner, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m grainfn bench" in out
    for option in ("--quick", "--suite NAME", "--markdown PATH", *runner.SUITES):
        assert option in out


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


def test_every_benchmark_module_is_a_suite_or_the_harness(runner) -> None:
    helpers = {"__init__", "harness", "run", "workers"}
    modules = {path.stem for path in (ROOT / "benchmarks").glob("*.py")} - helpers
    assert modules == set(runner.SUITES)
    for name in modules:
        text = (ROOT / "benchmarks" / f"{name}.py").read_text()
        ending = f'run_suite("{name}", __doc__ or "", steps, targets, DEFAULT, QUICK)'
        assert ending in text and "grainfn._src.facade" not in text


def test_the_benchmarks_stay_within_their_line_budgets() -> None:
    # Modules are sized by concept; the budgets are for the whole directory.
    paths = list((ROOT / "benchmarks").glob("*.py"))
    lines = sum(len(path.read_text().splitlines()) for path in paths)
    assert lines < LINE_BUDGET, f"benchmarks/ has {lines} lines, the budget is {LINE_BUDGET}"
    code = sum(code_lines(path) for path in paths)
    assert code < CODE_LINE_BUDGET, (
        f"benchmarks/ has {code} lines of code, the budget is {CODE_LINE_BUDGET}"
    )


def test_lines_of_code_leave_out_blank_lines_comments_and_docstrings(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        '"""A module.\n\nIts docstring."""\n\n# a comment\nX = 1\n"""X\'s docstring."""\n\n\n'
        'def f() -> str:\n    """One line."""\n    return "not a docstring"\n'
    )
    assert code_lines(module) == 3  # X = 1, def f, return


@pytest.mark.slow
def test_every_suite_takes_its_config_shape_from_the_harness(runner) -> None:
    code = (
        "import importlib, json, sys\n"
        "from benchmarks import harness\n"
        "shapes = {}\n"
        "for name in sys.argv[1:]:\n"
        "    suite = importlib.import_module(f'benchmarks.{name}')\n"
        "    shapes[name] = [\n"
        "        issubclass(suite.Config, harness.Config),\n"
        "        type(suite.DEFAULT) is type(suite.QUICK) is suite.Config,\n"
        "        suite.QUICK != suite.DEFAULT,\n"
        "    ]\n"
        "print(json.dumps(shapes))\n"
    )
    command = [sys.executable, "-c", code, *runner.SUITES]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    shapes = json.loads(result.stdout.splitlines()[-1])
    assert shapes == {name: [True, True, True] for name in runner.SUITES}


def test_measure_warms_up_interleaves_and_keeps_the_last_result(harness) -> None:
    calls: list[str] = []
    cases = {
        "a": harness.Case(lambda: calls.append("a") or len(calls), setup=lambda: calls.append("s")),
        "b": harness.Case(lambda: calls.append("b"), warmup=lambda: calls.append("w")),
    }
    timings = harness.measure(cases, harness.Timer(repeats=3, burst=0.0))
    assert calls[:3] == ["s", "a", "w"]  # the setups and warm-ups, before any timed run
    assert calls[3:] == ["s", "a", "b"] * 3  # bursts of one run: the cases alternate
    assert len(timings["a"].runs) == len(timings["b"].runs) == 3
    assert timings["a"].result == 11 and timings["a"].best <= timings["a"].median
    budget = harness.measure({"slow": harness.Case(lambda: None)}, harness.Timer(3, budget=0.0))
    assert len(budget["slow"].runs) == 1  # one run at least, then none past the budget


def test_rows_and_targets(harness) -> None:
    row = harness.Row(
        "B9", "fake work", {"grainfn": 1e-3, "Grain default": 4e-3, "hand loop": 5e-4}, 10
    )
    assert (row.name, row.cell("grainfn"), row.cell("missing")) == ("B9 fake work", "10 ms", "n/a")
    assert (row.grain_speedup(), row.over("hand loop")) == (4.0, 2.0)
    rate = harness.Row(
        "B5a block", "", {"grainfn": 1e-7, "Grain": 1e-4}, 10, "rate", sampled=("Grain",)
    )
    assert (rate.cell("grainfn"), rate.cell("Grain")) == ("10 M idx/s", "10 k idx/s†")
    assert rate.grain_speedup() == pytest.approx(1000)
    targets = [
        harness.Target.at_least("B9: >= 3x Grain default", row.grain_speedup(), 3),
        harness.Target.at_most("B9: within 1.5x of the hand loop", row.over("hand loop"), 1.5),
        harness.Target.check("Packed elements = Grain's", True),
    ]
    assert [(t.measured, t.met) for t in targets] == [("4x", True), ("2x", False), ("yes", True)]
    assert harness.status(row, targets) == "1/2 met" and harness.status(rate, targets) == ""
    assert harness.Target("B5a: fast", "", True).is_about(rate)
    assert harness.Target("State taken with 2 workers: ok", "", True).is_about(
        harness.Row("State", "", {})
    )
    assert not harness.Target("B1: fast", "", True).is_about(harness.Row("B10", "", {}))


def test_suite_summary_json_round_trips_and_the_texts_show_it(
    harness, runner, tmp_path, capsys
) -> None:
    rows = [
        harness.Row(
            "B9",
            "fake work " + "x" * 80,
            {"grainfn": 1e-3, "Grain default": 4e-3, "hand loop": 5e-4},
        ),
        harness.Row(
            "C9",
            "",
            {"grainfn": 2e-6, "plain": 3e-6},
            unit="us",
            detail="small",
            checks={"same": False},
        ),
    ]
    steps = lambda c: [harness.Step("fake step", lambda: rows)]  # noqa: E731
    judge = lambda by_key: [  # noqa: E731
        harness.Target.at_least("B9: >= 3x Grain default", by_key["B9"].grain_speedup(), 3),
        harness.Target.check("C9: same outputs", all(by_key["C9"].checks.values())),
    ]
    summary, events = tmp_path / "fake.json", tmp_path / "fake.events"
    argv = [
        "--quick",
        "--json",
        str(summary),
        "--events",
        str(events),
        "--markdown",
        str(tmp_path / "f.md"),
    ]
    config = harness.Config()
    runner.run_suite("fake", "A fake suite.", steps, judge, config, config, argv)
    printed = capsys.readouterr()
    assert events.read_text() == "0 1 fake step\n1 1 done\n" and printed.err == ""  # no bar here
    report = runner.SuiteReport.from_json(json.loads(summary.read_text()))
    assert (report.suite, report.quick, report.status, report.rows) == (
        "fake",
        True,
        0,
        tuple(rows),
    )
    assert [(t.text, t.measured, t.met) for t in report.targets] == [
        ("B9: >= 3x Grain default", "4x", True),
        ("C9: same outputs", "no", False),
    ]
    failed = runner.SuiteReport(
        "broken", True, 2.0, status=1, log="Traceback\nAssertionError: boom"
    )
    text = runner.summary_text([report, failed])
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines) and printed.out.startswith(lines[0])
    b9 = table_cells(lines[2])
    assert b9[0] == "fake" and b9[1].startswith("B9 fake work xx") and b9[1].endswith("…")
    assert b9[2:] == ["1 ms", "4x", "2x", "met"]
    assert table_cells(lines[3])[1:] == ["C9", "2 µs", "n/a", "n/a", "NOT met"]
    assert "1 of 2 targets met; 1 of 2 suites ran in " in text
    assert "NOT met: fake: C9: same outputs (no)" in lines
    assert "FAILED: benchmarks.broken exited with status 1; its output ends:" in lines
    assert lines[-1] == "    AssertionError: boom"
    markdown = runner.markdown_text([report, failed])
    assert "| Benchmark " in markdown and "| plain |" in re.sub(r" +", " ", markdown)
    assert "- C9: small Checks: same: NO." in markdown
    assert re.search(r"^\| C9: same outputs +\| +no \| NOT met \|$", markdown, re.M)
    assert "## broken\n\nFAILED with status 1:" in markdown
    assert (tmp_path / "f.md").read_text() == runner.markdown_text([report])


def test_a_suite_that_fails_to_run_makes_the_exit_status_1(runner, monkeypatch, capsys) -> None:
    monkeypatch.setattr(runner, "SUITES", (*runner.SUITES, "no_such_suite"))
    assert runner.main(["--quick", "--suite", "no_such_suite"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "0 of 0 targets met; 0 of 1 suites ran in " in captured.out
    assert "FAILED: benchmarks.no_such_suite exited with status 1; its output ends:" in lines
    assert lines[-1].endswith("No module named benchmarks.no_such_suite")
    assert "[1/1] no_such_suite" in captured.err and "FAILED" in captured.err
