"""Issue 29: each device, and each host, reads exactly its rows of the global batch.

`JaxDataset.get_rows` and `step_rows` give shard `s` of `n` its contiguous
rows of a batch (`fn.elastic_batches`' layout of hosts). In this process:
the shards' rows, stacked, are the host's batches for random device
pipelines, in both integer modes and past 2**32 rows, with traced shards,
and bad arguments are refused by name. In subprocesses (`sharding_run.py`):

- one process with 4 forced CPU devices: `jit` with out_shardings and with
  sharding constraints gives the host's global batches, each device holding
  its rows; `shard_map` and `pmap` over `step_rows` give each device its part
  of the host's batch across an epoch boundary; a state saved after 3 steps
  on 4 devices resumes on 2 and on 1 with the same global batches;
- 2 real `jax.distributed` processes of 2 CPU devices each, a global mesh of
  4: each process's devices hold their part of the host's global batch, with
  `jit` plus shardings and with `shard_map`.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from device import sharding_run as RUN  # the pipelines the processes read (it imports no jax)
from device.modes import exact_mode
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn, testing
from grainfn._src.core.compiler import NotOnDeviceError
from grainfn.fn import DatasetPosition, EpochPosition

SCRIPT = Path(__file__).with_name("sharding_run.py")
ROOT = Path(__file__).parents[2]
RUN_TIMEOUT = 240.0
"""Seconds a subprocess run may take before it is killed (a healthy one takes ~15-40)."""


# In this process: rows of one device, stacked.


def rows_of(batch: Any, shard: int, num_shards: int) -> Any:
    """Shard `shard` of `num_shards`'s contiguous rows of every leaf of `batch`."""
    per = len(jax.tree_util.tree_leaves(batch)[0]) // num_shards
    return jax.tree.map(lambda leaf: leaf[shard * per : (shard + 1) * per], batch)


def assert_trees_equal(actual: Any, expected: Any, where: str) -> None:
    """Equal structure (dict keys in any order) and equal leaves."""
    actual, expected = (jax.tree.map(np.asarray, tree) for tree in (actual, expected))
    assert jax.tree.structure(actual) == jax.tree.structure(expected), where
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        np.testing.assert_array_equal(got, want, err_msg=where)


def batched(ds: Any) -> Any:
    """A batch of 4 of `ds` that runs on device: every epoch's batches full."""
    if ds.length >= 4:
        return fn.batch(4, ds, drop_remainder=True)
    return fn.batch(4, fn.repeat(4, ds))


def host_twin_batches(jds: Any, steps: int) -> list[Any]:
    """The first batches of the host twin (what `step` reads), as far as the host reads."""
    batches = []
    with contextlib.suppress(OverflowError):  # a later epoch of an infinite stage passes 2**63
        for batch in fn.iterate(jds, DatasetPosition(0)):
            batches.append(batch)
            if len(batches) == steps:
                break
    return batches


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(ds=testing.device_datasets(), num_shards=st.sampled_from([1, 2, 4]))
def test_the_shards_rows_stack_into_the_hosts_batches(ds: Any, num_shards: int) -> None:
    ds = batched(ds)
    with exact_mode(ds):
        jds = fn.to_jax(ds)

        @jax.jit
        def every_shard(jds: Any, state: EpochPosition) -> Any:
            shards = jnp.arange(num_shards)  # traced: one program for every shard
            rows, after = jax.vmap(lambda s: jds.step_rows(state, s, num_shards))(shards)
            return rows, after, jds.step(state)[1]

        state = jds.init()
        for step, host in enumerate(host_twin_batches(jds, min(ds.length, 3) + 1)):
            rows, after, stepped = every_shard(jds, state)
            for shard in range(num_shards):
                where = f"step {step}, shard {shard} of {num_shards}"
                got = jax.tree.map(lambda leaf, shard=shard: leaf[shard], rows)
                assert_trees_equal(got, rows_of(host, shard, num_shards), where)
                assert_trees_equal(
                    jax.tree.map(lambda f, shard=shard: f[shard], after), stepped, where
                )
            state = stepped


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True], ids=["32-bit", "64-bit"])
def test_rows_past_2_to_the_32_are_exact(x64: bool) -> None:
    corpora = [fn.repeat(None, fn.shuffle(fn.range(n), seed=n)) for n in (1000, 70)]
    ds = fn.batch(8, fn.mix(corpora, [0.8, 0.2]))
    with jax.enable_x64(x64):
        jds = fn.to_jax(ds)
        for position in (0, 2**29 + 3, 2**31 - 1):  # rows up to 2**34: pairs of words in 32-bit
            state = jds.device_state(DatasetPosition(position))
            for shard in range(4):
                rows, after = jax.jit(fn.JaxDataset.step_rows, static_argnums=3)(
                    jds, state, shard, 4
                )
                expected = rows_of(ds.get(position), shard, 4)
                assert_trees_equal(rows, expected, f"position {position}, shard {shard}")
                assert jds.host_state(after) == DatasetPosition(position + 1)


@pytest.mark.slow
def test_traced_shards_under_vmap_and_jit() -> None:
    ds = RUN.pipelines()["shuffled"]
    jds = fn.to_jax(ds)

    @jax.jit
    def every_shard(jds: Any, state: EpochPosition) -> Any:
        return jax.vmap(lambda shard: jds.step_rows(state, shard, 4)[0])(jnp.arange(4))

    state = jds.device_state(DatasetPosition(4))  # the last batch of epoch 0
    for position in (4, 5):
        stacked = jax.tree.map(
            lambda leaf: leaf.reshape(8, *leaf.shape[2:]), every_shard(jds, state)
        )
        assert_trees_equal(stacked, ds.get(position), f"position {position}")
        state = jds.step(state)[1]
    rows = jax.jit(lambda p, s: jds.get_rows(p, s, 2))(jnp.int32(6), jnp.int32(1))
    assert_trees_equal(rows, rows_of(ds.get(6), 1, 2), "get_rows at position 6")


def test_a_top_stage_that_is_not_a_batch_is_refused_naming_it() -> None:
    def double(batch: Any) -> Any:
        return batch * 2

    jds = fn.to_jax(fn.map(double, fn.batch(4, fn.range(8))))
    message = "step_rows reads some rows of a batch, but the top stage of this to_jax pipeline "
    with pytest.raises(NotOnDeviceError, match=re.escape(message + "is 'map(")):
        jds.step_rows(jds.init(), 0, 2)
    with pytest.raises(NotOnDeviceError, match="get_rows reads some rows of a batch"):
        jds.get_rows(0, 0, 2)


@pytest.mark.parametrize(
    ("shard", "num_shards", "error", "message"),
    [
        (
            0,
            3,
            ValueError,
            r"num_shards=3, which does not divide the batch size 8.*\(such as 1, 2, 4, 8\)",
        ),
        (0, 0, ValueError, r"num_shards=0: it is the number of shards sharing a batch"),
        (0, 2.0, ValueError, r"num_shards=2.0: .*a Python int >= 1"),
        (0, True, ValueError, r"num_shards=True"),
        (4, 4, ValueError, r"shard=4; it must be an integer in \[0, 3\] for num_shards=4"),
        (-1, 4, ValueError, r"shard=-1; it must be an integer in \[0, 3\]"),
        (1.0, 4, TypeError, r"takes shard as one integer, got 1.0"),
        (np.arange(2), 2, TypeError, r"takes shard as one integer"),
    ],
)
def test_bad_shards_are_refused_naming_the_values(
    shard: Any, num_shards: Any, error: type[Exception], message: str
) -> None:
    jds = fn.to_jax(fn.batch(8, fn.range(16)))
    with pytest.raises(error, match=message):
        jds.step_rows(jds.init(), shard, num_shards)
    with pytest.raises(error, match=message):
        jds.get_rows(0, shard, num_shards)


# In subprocesses: 4 forced devices, and 2 jax.distributed processes.


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


def run_processes(folder: Path, commands: list[list[str]]) -> list[dict[str, Any]]:
    """Runs the commands at once, on the CPU backend; returns their pickled outputs in order.

    A process that fails, or a run past `RUN_TIMEOUT`, kills them all and fails the test
    with their logs.
    """
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}
    env.pop("XLA_FLAGS", None)  # each process sets its own device count
    outputs = [folder / f"out_{i}.pkl" for i in range(len(commands))]
    logs = [folder / f"log_{i}.txt" for i in range(len(commands))]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for command, output, log_path in zip(commands, outputs, logs):
            with log_path.open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [*command, "--output", str(output)],
                        cwd=ROOT,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        deadline, why = time.monotonic() + RUN_TIMEOUT, ""
        while any(p.poll() is None for p in processes):
            if any(p.returncode not in (None, 0) for p in processes):
                break  # the others would wait for it at a barrier until the timeout
            if time.monotonic() > deadline:
                why = f"Timeout after {RUN_TIMEOUT:.0f} s: killed."
                break
            time.sleep(0.05)
        if why or any(p.returncode != 0 for p in processes):
            for process in processes:
                kill_group(process)
            report = [why or "A process failed."]
            for i, (log, process) in enumerate(zip(logs, processes)):
                report.append(f"--- process {i} (exit code {process.returncode}), {log}:")
                report.append(log.read_text(errors="replace")[-4000:])
            pytest.fail("\n".join(report))
    finally:
        for process in processes:
            kill_group(process)
    return [pickle.loads(output.read_bytes()) for output in outputs]


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kills `process` and whatever it started, then reaps it."""
    with contextlib.suppress(ProcessLookupError):  # the group ended already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def host_batches() -> dict[str, list[Any]]:
    """Each pipeline's first global batches, read on the host (numpy) in this process."""
    return {name: ds.get_many(range(RUN.STEPS)) for name, ds in RUN.pipelines().items()}


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The checks of one process with 4 forced CPU devices."""
    folder = tmp_path_factory.mktemp("four_devices")
    (out,) = run_processes(folder, [[sys.executable, str(SCRIPT), "--devices", "4"]])
    return dict(out["checks"])


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The checks of 2 `jax.distributed` processes of 2 CPU devices each."""
    folder = tmp_path_factory.mktemp("two_processes")
    port = str(free_port())
    common = [sys.executable, str(SCRIPT), "--devices", "2", "--num-processes", "2"]
    commands = [[*common, "--port", port, "--process-id", str(i)] for i in range(2)]
    return run_processes(folder, commands)


def assert_device_rows(
    recorded: Any, batch: Any, devices: list[int], num_devices: int, where: str
) -> None:
    """Each device of `devices` holds its part of `batch`: rows `[i * per, (i + 1) * per)`.

    `recorded` is `sharding_run.record`'s: per leaf, `(mesh index, first row,
    end row, rows)` of each device this process holds.
    """
    recorded_leaves = jax.tree.leaves(recorded, is_leaf=lambda x: isinstance(x, list))
    batch = jax.tree.map(np.asarray, batch)
    assert len(recorded_leaves) == len(jax.tree.leaves(batch)), where
    for shards, leaf in zip(recorded_leaves, jax.tree.leaves(batch)):
        assert [index for index, *_ in shards] == devices, where
        per = len(leaf) // num_devices
        for index, start, stop, rows in shards:
            assert (start, stop) == (index * per, (index + 1) * per), f"{where}, device {index}"
            np.testing.assert_array_equal(
                rows, leaf[start:stop], err_msg=f"{where}, device {index}"
            )


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["shuffled", "mix"])
def test_four_devices_jit_with_shardings_holds_each_devices_rows(
    four_devices: dict[str, Any], host_batches: dict[str, list[Any]], pipeline: str
) -> None:
    checks, host = four_devices[pipeline], host_batches[pipeline]
    for step, out in enumerate(checks["out_shardings"]):
        assert_device_rows(out["rows"], host[step], [0, 1, 2, 3], 4, f"out_shardings, step {step}")
        assert out["state"] == step + 1
    scanned = checks["constraint"]
    stacked = jax.tree.map(lambda *leaves: np.stack(leaves), *host)
    for step in range(RUN.STEPS):  # the scan stacks steps on axis 0, rows on axis 1
        at_step = jax.tree.map(
            lambda shards, step=step: [(i, a, b, rows[step]) for i, a, b, rows in shards],
            scanned["rows"],
            is_leaf=lambda x: isinstance(x, list),
        )
        expected = jax.tree.map(lambda leaf, step=step: leaf[step], stacked)
        assert_device_rows(at_step, expected, [0, 1, 2, 3], 4, f"constraint, step {step}")
    assert scanned["state"] == RUN.STEPS


@pytest.mark.parametrize("pipeline", ["shuffled", "mix"])
def test_four_devices_step_their_rows_in_shard_map_and_pmap(
    four_devices: dict[str, Any], host_batches: dict[str, list[Any]], pipeline: str
) -> None:
    checks, host = four_devices[pipeline], host_batches[pipeline]
    assert RUN.pipelines()[pipeline].length < RUN.STEPS or pipeline == "mix"  # past an epoch
    for step, out in enumerate(checks["shard_map"]):
        assert_device_rows(out["rows"], host[step], [0, 1, 2, 3], 4, f"shard_map, step {step}")
        assert out["state"] == step + 1
    for step, out in enumerate(checks["pmap"]):  # axis 0 of the output: the device
        for device in range(4):
            device_rows = jax.tree.map(lambda leaf, d=device: leaf[d], out["rows"])
            where = f"pmap, step {step}, device {device}"
            assert_trees_equal(device_rows, rows_of(host[step], device, 4), where)
        assert out["state"] == step + 1


@pytest.mark.parametrize("pipeline", ["shuffled", "mix"])
@pytest.mark.parametrize("count", [2, 1])
def test_a_state_from_four_devices_resumes_on_fewer(
    four_devices: dict[str, Any], host_batches: dict[str, list[Any]], pipeline: str, count: int
) -> None:
    resumed, host = four_devices[pipeline][f"resumed_on_{count}"], host_batches[pipeline]
    assert len(resumed) == RUN.STEPS
    for step, out in enumerate(resumed):
        devices = 4 if step < RUN.RESUME_AFTER else count
        where = f"step {step} on {devices} devices"
        assert_device_rows(out["rows"], host[step], list(range(devices)), devices, where)
        assert out["state"] == step + 1


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["shuffled", "mix"])
def test_two_processes_hold_their_devices_rows_of_the_global_batch(
    two_processes: list[dict[str, Any]], host_batches: dict[str, list[Any]], pipeline: str
) -> None:
    host = host_batches[pipeline]
    assert [out["process"] for out in two_processes] == [0, 1]
    for out in two_processes:
        devices = [2 * out["process"], 2 * out["process"] + 1]  # its part of the global mesh
        checks = out["checks"][pipeline]
        assert len(checks["out_shardings"]) == RUN.DISTRIBUTED_JIT_STEPS
        assert len(checks["shard_map"]) == RUN.STEPS
        for kind in ("out_shardings", "shard_map"):
            for step, record in enumerate(checks[kind]):
                where = f"process {out['process']}, {kind}, step {step}"
                assert_device_rows(record["rows"], host[step], devices, 4, where)
                assert record["state"] == step + 1
