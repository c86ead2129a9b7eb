"""The package as a user meets it: command line, demo (its import: test_lazy.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grainfn.__main__ import main


@pytest.mark.slow
def test_demo_runs_and_resumes_identically(capsys) -> None:
    assert main(["demo", "--size", "900", "--batch-size", "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "mix(weights=[3.0, 1.0])" in out
    assert "Pipeline (2 worker processes):" in out
    plan = "Plan: 75 steps of 16 examples (1 epoch), checkpoint at step 37, SIGKILL at step 56."
    assert plan in out
    assert "ok   The resumed run's 38 batches (steps 38..75) are identical" in out
    assert "ok   The final parameters are bitwise identical to the reference run's." in out
    assert "FAIL" not in out
    assert "Result: identical." in out
    for run in ("pipeline alone", "reference", "preempted", "resumed"):
        assert re.search(rf"^{run} +\d+ +[\d,]+ +[\d,]+ ", out, re.M), run
    assert "restore" in out and "save()" in out


@pytest.mark.slow
def test_demo_exits_with_1_when_the_runs_differ(capsys, monkeypatch) -> None:
    from grainfn._src.demo import data

    augment = data.augment

    def unseeded(item, rng):  # fresh randomness: no run can repeat it
        return augment(item, np.random.default_rng())

    # The same name, so that the saved state still fits the pipeline (its stages name their
    # functions): the pipeline is the same, but its random_map is not deterministic.
    unseeded.__name__, unseeded.__qualname__ = augment.__name__, augment.__qualname__
    monkeypatch.setattr(data, "augment", unseeded)
    args = ["demo", "--size", "300", "--workers", "0", "--steps", "6", "--no-progress"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "FAIL The resumed run saw 3 batches; they differ from the reference run" in out
    assert "Result: DIFFERENT from the uninterrupted run" in out


@pytest.mark.slow
def test_command_line_entry_point(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "grainfn", "demo", "--size", "300", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Result: identical." in result.stdout
    killed = re.search(r"SIGKILL to pid (\d+) when it reported step (\d+)", result.stdout)
    assert killed is not None, result.stdout
    assert "the blocks in flight went with them" in result.stdout
    # Nothing left behind: no process of the killed job's group, no temporary files.
    assert not _process_group(int(killed.group(1)))
    assert list(tmp_path.iterdir()) == []
    bad = subprocess.run(
        [sys.executable, "-m", "grainfn", "frobnicate"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "invalid choice: 'frobnicate'" in bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "30"], "One epoch of size 30 holds only 0 batches of 64"),
        (["--steps", "3"], "steps must be at least 4"),
        (["--workers", "-1"], "workers must be >= 0"),
        (["--batch-size", "0"], "batch_size must be at least 1, got 0."),
        (["--seed", "-1"], "seed must be in [0, 2**32 - 1)"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_demo_refuses_bad_options(args, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def _process_group(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members
