"""The package as a user meets it: import, command line, demo."""

from __future__ import annotations

import subprocess
import sys

from grainfn.__main__ import main


def test_import_grainfn_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, grainfn\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'jax', 'jaxlib', 'orbax', 'array_record', 'grain', 'tensorstore', 'pyarrow'})\n"
        "print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_demo_runs_and_resumes_identically(capsys) -> None:
    assert main(["demo", "--size", "900", "--batch-size", "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "identical to the uninterrupted run" in out
    assert "examples/s" in out
    assert "mix(weights=[3.0, 1.0])" in out


def test_command_line_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "grainfn", "demo", "--size", "300", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "identical" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "grainfn", "frobnicate"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "invalid choice: 'frobnicate'" in bad.stderr
