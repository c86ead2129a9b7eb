"""Two real JAX processes on one machine, each reading its shard with ShardByJaxProcess."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("multihost_process.py")
DOCS = Path(__file__).parents[2] / "docs" / "dataloader.md"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_two_processes(command: list[str], extra_env: dict[str, str] | None = None) -> list[str]:
    """Runs `command + [process id]` twice at once; returns each process's output."""
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "COORDINATOR": f"127.0.0.1:{port}"}
    env["NUM_PROCESSES"] = "2"
    processes = [
        subprocess.Popen(
            [part.format(process=i, port=port) for part in command],
            env={**env, "PROCESS_ID": str(i), **(extra_env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    try:
        logs = [process.communicate(timeout=120)[0] for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, log in zip(processes, logs):
        assert process.returncode == 0, log[-3000:]
    return logs


@pytest.mark.slow
def test_two_jax_processes_read_disjoint_shards_and_build_global_arrays(tmp_path: Path) -> None:
    outputs = [tmp_path / f"process_{i}.json" for i in range(2)]
    output = str(tmp_path / "process_{process}.json")
    run_two_processes([sys.executable, str(SCRIPT), "{process}", "{port}", output])
    results = [json.loads(path.read_text()) for path in outputs]

    assert [r["shard"] for r in results] == [[0, 2], [1, 2]]
    first, second = (set(r["records"]) for r in results)
    assert len(results[0]["records"]) == len(first) == 24
    assert not first & second
    assert first | second == set(range(48))
    assert all(r["resumed_equal"] for r in results)

    local_batches = results[0]["local_batches"]
    assert results[1]["local_batches"] == local_batches
    expected_rows = local_batches[0] + local_batches[1]
    for r in results:
        assert r["global_shape"] == [8]
        assert r["global_rows"] == expected_rows
        assert r["global_sum"] == sum(expected_rows)


@pytest.mark.slow
def test_the_documented_multihost_recipe_runs_in_two_processes(tmp_path: Path) -> None:
    text = DOCS.read_text()
    recipe = text.split("<!-- multihost-recipe -->\n```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "recipe.py"
    script.write_text(recipe)
    logs = run_two_processes([sys.executable, str(script)])
    lines = [re.findall(r"process (\d) step (\d+): \[([\d, ]+)\] sum (\d+)", log) for log in logs]
    assert [len(found) for found in lines] == [4, 4]  # 64 records, 2 shards, batches of 8
    records = [{int(x) for *_, batch, _ in found for x in batch.split(", ")} for found in lines]
    assert not records[0] & records[1]
    assert records[0] | records[1] == set(range(64))
    for step in range(4):
        sums = {found[step][3] for found in lines}
        batches = [int(x) for found in lines for x in found[step][2].split(", ")]
        assert sums == {str(sum(batches))}
