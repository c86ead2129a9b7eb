"""Issue 19's acceptance test: an elastic run over 4, then 2, then 1 real JAX processes.

Every phase starts separate Python processes (`multihost_run.py`) that join
`jax.distributed` on the CPU backend, each reading its part of every global
batch from an `ElasticIterator` over a filtered, named-mix, packed pipeline
cut into 4 logical shards:

- phase A: 4 processes take 5 global batches and save with Orbax
  (`CheckpointSave`), one state file per process;
- phase B: 2 processes restore that checkpoint (written by 4), take 5 more,
  build global `jax.Array`s from their first batch, and save again;
- phase C: 1 process restores (written by 2) and runs to the end.

What is proven, with and without 2 worker processes per JAX process:

- the host batches, stacked in host order step by step across the three
  phases, are element for element the global batches of one uninterrupted
  single-process run (no batch lost, repeated or reordered by a change of
  host count, and the run ends at the same step);
- `make_global_array` puts on each process exactly the rows of the global
  batch that host computes, and `process_allgather` of the global arrays is
  the whole global batch;
- a checkpoint step missing one process's file is refused with a ValueError
  naming that file, instead of restarting a logical shard silently;
- each JAX process of the run with workers had its own 2 worker processes,
  and the pipeline really filters both sources, mixes them, and packs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src.checkpoint import files

SCRIPT = Path(__file__).with_name("multihost_run.py")
ROOT = Path(__file__).parents[2]
PHASE_TIMEOUT = 100.0
"""Seconds a phase may take before its processes are killed (a healthy one takes ~5-15)."""

STEPS_A, STEPS_B = 5, 5
SAVE_A, SAVE_B = STEPS_A, STEPS_A + STEPS_B

Batch = dict[str, np.ndarray]


def load_run_module() -> ModuleType:
    """`multihost_run.py` as a module: the pipeline the processes run (it imports no JAX)."""
    spec = importlib.util.spec_from_file_location("elastic_multihost_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = load_run_module()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


def process_env() -> dict[str, str]:
    """The test's environment on the CPU backend, with this checkout importable."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kills `process` and whatever it started (its grainfn workers), then reaps it."""
    with contextlib.suppress(ProcessLookupError):  # the group ended already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def failure_report(logs: list[Path], processes: list[subprocess.Popen[bytes]], why: str) -> str:
    parts = [why]
    for i, (log, process) in enumerate(zip(logs, processes)):
        parts.append(f"--- process {i} (exit code {process.returncode}), {log}:")
        parts.append(log.read_text(errors="replace")[-4000:])
    return "\n".join(parts)


def wait_all(processes: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Waits for every process to succeed; kills them all and fails at an error or timeout."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    why = ""
    while not why and any(p.poll() is None for p in processes):
        if any(p.returncode not in (None, 0) for p in processes):
            break  # the others would wait for it at a barrier until the timeout
        if time.monotonic() > deadline:
            why = f"Timeout after {PHASE_TIMEOUT} s: killed."
        time.sleep(0.05)
    if not why and any(p.returncode != 0 for p in processes):
        why = "A process failed."
    if why:
        for p in processes:
            kill_group(p)
        pytest.fail(failure_report(logs, processes, why))


def run_processes(
    folder: Path, name: str, commands: list[list[str]], envs: list[dict[str, str]]
) -> list[str]:
    """Runs the commands at once, each with its environment added; returns their logs."""
    logs = [folder / f"{name}_{i}.log" for i in range(len(commands))]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for command, env, log_path in zip(commands, envs, logs):
            with log_path.open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        command,
                        cwd=ROOT,
                        env={**process_env(), **env},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        wait_all(processes, logs)
    finally:
        for process in processes:
            kill_group(process)
    return [log.read_text(errors="replace") for log in logs]


def run_phase(folder: Path, name: str, num_processes: int, options: list[str]) -> list[Any]:
    """Runs one phase in `num_processes` JAX processes; returns each one's output, in order."""
    port = str(free_port())
    outputs = [folder / f"{name}_{i}.pkl" for i in range(num_processes)]
    common = [sys.executable, str(SCRIPT), "--num-processes", str(num_processes), "--port", port]
    commands = [
        [*common, "--process-id", str(i), "--output", str(outputs[i]), *options]
        for i in range(num_processes)
    ]
    run_processes(folder, name, commands, [{}] * num_processes)
    return [pickle.loads(path.read_bytes()) for path in outputs]


def run_recipe(folder: Path, script: Path, num_processes: int, checkpoints: Path) -> list[str]:
    """Runs a documented recipe in `num_processes` JAX processes (its env protocol)."""
    coordinator = f"localhost:{free_port()}"
    envs = [
        {
            "COORDINATOR": coordinator,
            "NUM_PROCESSES": str(num_processes),
            "PROCESS_ID": str(i),
            "CHECKPOINTS": str(checkpoints),
        }
        for i in range(num_processes)
    ]
    commands = [[sys.executable, str(script)]] * num_processes
    return run_processes(folder, f"recipe{num_processes}", commands, envs)


@dataclasses.dataclass(frozen=True)
class Scenario:
    """The outputs of the three phases, and where their checkpoints are."""

    workers: int | None
    checkpoints: Path
    phases: tuple[list[Any], ...]


@pytest.fixture(scope="module", params=[None, 2], ids=["no-workers", "2-workers"])
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    workers: int | None = request.param
    folder = tmp_path_factory.mktemp("elastic_multihost")
    checkpoints = folder / "checkpoints"
    common = ["--checkpoints", str(checkpoints)]
    if workers is not None:
        common += ["--workers", str(workers)]
    shards = ["--num-logical-shards", str(RUN.NUM_LOGICAL_SHARDS)]
    save_a = ["--steps", str(STEPS_A), "--save-step", str(SAVE_A)]
    phase_a = run_phase(folder, "A", 4, [*common, *shards, *save_a])
    # On restore, the run without workers takes the number of logical shards from
    # the checkpoint (None); the one with workers passes it again.
    restored = [*common, *([] if workers is None else shards)]
    restore_b = ["--restore-step", str(SAVE_A), "--global-array"]
    save_b = ["--steps", str(STEPS_B), "--save-step", str(SAVE_B)]
    phase_b = run_phase(folder, "B", 2, [*restored, *restore_b, *save_b])
    phase_c = run_phase(folder, "C", 1, [*restored, "--restore-step", str(SAVE_B)])
    return Scenario(workers, checkpoints, (phase_a, phase_b, phase_c))


@pytest.fixture(scope="module")
def uninterrupted() -> list[Batch]:
    """Every global batch of one single-process run, never checkpointed."""
    it = RUN.elastic_iterator(0, 1, None, RUN.NUM_LOGICAL_SHARDS)
    batches = list(it)
    it.close()
    return batches


def stack_hosts(host_batches: list[Batch]) -> Batch:
    """The global batch: each leaf of the hosts' batches concatenated in host order."""
    first = host_batches[0]
    assert all(batch.keys() == first.keys() for batch in host_batches)
    return {name: np.concatenate([batch[name] for batch in host_batches]) for name in first}


def global_batches(phase: list[Any]) -> list[Batch]:
    """The global batches of one phase, from its processes' outputs (in process order)."""
    assert [out["process"] for out in phase] == list(range(len(phase)))
    counts = {len(out["batches"]) for out in phase}
    assert len(counts) == 1, f"the hosts took different numbers of batches: {counts}"
    return [stack_hosts([out["batches"][step] for out in phase]) for step in range(counts.pop())]


def assert_batches_equal(actual: Batch, expected: Batch, where: str) -> None:
    assert sorted(actual) == sorted(expected), where
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=f"{where}, {name!r}")


def packed_sequences(batches: list[Batch]) -> list[np.ndarray]:
    """The sequences packed into the rows of `batches`, cut by their segment ids."""
    found = []
    for batch in batches:
        for tokens, segments in zip(batch["tokens"], batch["tokens_segment_ids"]):
            found += [tokens[segments == s] for s in np.unique(segments[segments > 0])]
    return found


def test_the_pipeline_filters_mixes_both_sources_and_packs(uninterrupted: list[Batch]) -> None:
    sequences = packed_sequences(uninterrupted)
    from_a = [seq for seq in sequences if seq[0] < RUN.B_OFFSET]
    from_b = [seq for seq in sequences if seq[0] >= RUN.B_OFFSET]
    assert from_a and from_b
    assert all(np.array_equal(seq, seq[0] + np.arange(len(seq))) for seq in sequences)
    assert len(sequences) > sum(len(batch["tokens"]) for batch in uninterrupted)  # packed
    # Each filter drops elements of its source, and none of those comes out.
    a, b = RUN.source(0, 160, seed=1), RUN.source(RUN.B_OFFSET, 120, seed=2)
    assert not all(map(RUN.keep_a, a)) and not all(map(RUN.keep_b, b))
    assert all(RUN.keep_a({"tokens": seq}) for seq in from_a)
    assert all(RUN.keep_b({"tokens": seq}) for seq in from_b)


@pytest.mark.slow
def test_host_batches_stack_into_the_uninterrupted_global_batches(
    scenario: Scenario, uninterrupted: list[Batch]
) -> None:
    phase_a, phase_b, phase_c = (global_batches(phase) for phase in scenario.phases)
    assert (len(phase_a), len(phase_b)) == (STEPS_A, STEPS_B)
    assert len(phase_c) > 0, "phase C ran nothing: make the data longer"
    run = phase_a + phase_b + phase_c
    assert len(run) == len(uninterrupted)
    for step, (actual, expected) in enumerate(zip(run, uninterrupted)):
        assert_batches_equal(actual, expected, f"global step {step}")
    (last,) = scenario.phases[2]
    assert (last["state"]["step"], last["state"]["stopped"]) == (len(uninterrupted), True)


def test_each_jax_process_ran_its_own_worker_processes(scenario: Scenario) -> None:
    phase_a, phase_b, _ = scenario.phases  # C ran to the end, where the workers stop
    found = [out["worker_processes"] for out in phase_a + phase_b]
    assert found == [scenario.workers or 0] * len(found)


def test_host_batches_hold_their_rows_of_each_global_batch(
    scenario: Scenario, uninterrupted: list[Batch]
) -> None:
    offset = 0
    for phase in scenario.phases:
        hosts = len(phase)
        rows = RUN.GLOBAL_BATCH_SIZE // hosts
        for out in phase:
            for step, batch in enumerate(out["batches"]):
                host_rows = slice(out["process"] * rows, (out["process"] + 1) * rows)
                expected = {k: v[host_rows] for k, v in uninterrupted[offset + step].items()}
                where = f"{hosts} hosts, host {out['process']}, global step {offset + step}"
                assert_batches_equal(batch, expected, where)
        offset += len(phase[0]["batches"])


def test_global_arrays_hold_each_hosts_rows_and_gather_the_global_batch(
    scenario: Scenario, uninterrupted: list[Batch]
) -> None:
    expected = uninterrupted[STEPS_A]  # phase B's first global batch
    phase_b = scenario.phases[1]
    per_host = RUN.GLOBAL_BATCH_SIZE // len(phase_b)
    for out in phase_b:
        record, host = out["global_array"], out["process"]
        assert record["shapes"] == {k: v.shape for k, v in expected.items()}
        for name, shards in record["shards"].items():
            covered: list[int] = []
            for start, stop, data in shards:
                np.testing.assert_array_equal(data, expected[name][start:stop], err_msg=name)
                covered += range(start, stop)
            assert sorted(covered) == list(range(host * per_host, (host + 1) * per_host))
        assert_batches_equal(record["gathered"], expected, f"process_allgather on host {host}")


@pytest.mark.parametrize(
    ("step", "deleted", "shard"),
    [(SAVE_A, "process_1-of-4.json", 1), (SAVE_B, "process_1-of-2.json", 2)],
)
def test_a_checkpoint_missing_a_process_file_is_refused_naming_it(
    scenario: Scenario, tmp_path: Path, step: int, deleted: str, shard: int
) -> None:
    saved = scenario.checkpoints / str(step) / "default"
    assert (saved / deleted).exists(), sorted(p.name for p in saved.iterdir())
    broken = tmp_path / "broken"
    shutil.copytree(saved, broken)
    (broken / deleted).unlink()
    it = RUN.elastic_iterator(0, 1, None, None)
    message = f"Logical shard {shard} of 4 is in no state file: it was {deleted}'s to save"
    with pytest.raises(ValueError, match=re.escape(message)):
        files.restore(it, broken)
    it.close()


def recipe_reference(script: Path, steps: int) -> list[np.ndarray]:
    """The recipe pipeline's first global batches, in this process without interruption."""
    spec = importlib.util.spec_from_file_location("elastic_recipe", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines pipeline() and main(); runs nothing
    it = grain.experimental.ElasticIterator(
        module.pipeline(), 8, grain.ShardOptions(0, 1), num_logical_shards=4
    )
    return [next(it) for _ in range(steps)]


@pytest.mark.slow
def test_the_documented_elastic_recipe_resumes_on_fewer_processes(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "elastic.md").read_text()
    recipe = text.split("<!-- elastic-recipe -->\n```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "recipe.py"
    script.write_text(recipe)
    checkpoints = tmp_path / "checkpoints"
    pattern = r"step (\d+): host rows \[([\d, ]+)\] global sum (\d+)"
    two = [re.findall(pattern, log) for log in run_recipe(tmp_path, script, 2, checkpoints)]
    one = [re.findall(pattern, log) for log in run_recipe(tmp_path, script, 1, checkpoints)]
    reference = recipe_reference(script, 6)
    assert [len(found) for found in two + one] == [3, 3, 3]
    for step in range(3):
        rows = [int(x) for found in two for x in found[step][1].split(", ")]
        assert rows == reference[step].tolist()
        assert {found[step][2] for found in two} == {str(sum(rows))}
        assert one[0][step][0] == str(step + 3)
        assert [int(x) for x in one[0][step][1].split(", ")] == reference[step + 3].tolist()
