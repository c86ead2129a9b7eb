"""One process of the sharding test (tests/device/test_sharding.py): devices read their rows.

Usage (from the repository root, with it on PYTHONPATH as the test sets it):

    python tests/device/sharding_run.py --devices N --output FILE \
        [--process-id I --num-processes P --port PORT]

The process forces `N` CPU devices (`XLA_FLAGS`, set before jax is
imported). Alone, it runs every check below on a mesh of its 4 devices,
then resumes on 2 and on 1; as process I of P of `jax.distributed` (on
localhost:PORT) it runs the `jit` and `shard_map` checks on the global mesh
of all processes' devices. It pickles, for each check and each step, the
rows each of its own devices holds (its mesh index, the rows' place in the
global batch, the rows), and the state after the step, to FILE. The test
compares them with the host's batches, computed in the test's own process.

`pipelines()` is imported by the test too; this module imports no jax at
import time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from grainfn import fn

STEPS = 7
"""Global batches each check reads: past the epoch boundary of the shuffled source (5)."""
RESUME_AFTER = 3
"""Steps taken on 4 devices before the state resumes on 2 and on 1."""
DISTRIBUTED_JIT_STEPS = 2
"""Steps of the partitioned `jit` between processes (see `run_distributed`)."""


def pipelines() -> dict[str, Any]:
    """The batched pipelines the devices read: batch 8 of a shuffled dict, and of an endless mix."""
    rng = np.random.default_rng(0)
    rows = {"x": rng.random((44, 3), dtype=np.float32), "y": np.arange(44, dtype=np.int32)}
    shuffled = fn.batch(8, fn.shuffle(fn.source(rows), seed=3), drop_remainder=True)
    # Endless, so its positions pass 2**32 on pairs of 32-bit words; unshuffled, as
    # the shuffled source above already is, for a shorter compile.
    corpora = [fn.repeat(None, fn.source(np.arange(n, dtype=np.int32) + 1000 * n)) for n in (13, 7)]
    mixed = fn.batch(8, fn.map(lambda x: x * 3 + 1, fn.mix(corpora, [0.7, 0.3])))
    return {"shuffled": shuffled, "mix": mixed}


def device_rows(array: Any, mesh: Any, axis: int) -> list[tuple[int, int, int, np.ndarray]]:
    """`(mesh index, first row, end row, rows)` of each shard of `array` this process holds.

    The rows are along `axis`: 0 for a batch, 1 for batches stacked by a scan.
    """
    order = [device.id for device in mesh.devices.flat]
    found = []
    for shard in array.addressable_shards:
        start, stop, _ = shard.index[axis].indices(array.shape[axis])
        found.append((order.index(shard.device.id), start, stop, np.asarray(shard.data)))
    return sorted(found, key=lambda item: item[0])


def record(batch: Any, mesh: Any, axis: int = 0) -> Any:
    """`device_rows` of each leaf of a global batch (a jax pytree of arrays)."""
    import jax

    return jax.tree.map(lambda leaf: device_rows(leaf, mesh, axis), batch)


def shard_map_steps(jds: Any, state: Any, mesh: Any, steps: int) -> tuple[list[Any], Any]:
    """`steps` global batches read by `shard_map`: each device steps its own rows."""
    import jax
    from jax.sharding import PartitionSpec as P

    count = mesh.devices.size

    def per_device(jds: Any, state: Any) -> Any:
        return jds.step_rows(state, jax.lax.axis_index("data"), count)

    step = jax.jit(
        jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P()), out_specs=(P("data"), P()))
    )
    out = []
    for _ in range(steps):
        rows, state = step(jds, state)
        out.append({"rows": record(rows, mesh), "state": jds.host_state(state).position})
    return out, state


def mesh_of(devices: list[Any]) -> Any:
    import jax

    return jax.sharding.Mesh(np.array(devices), ("data",))


def jit_checks(jds: Any, mesh: Any, steps: int, scan: bool) -> dict[str, Any]:
    """Plain `step` under `jit`: with out_shardings, and (`scan`) sharding constraints in a scan."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    rows, whole = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    step = jax.jit(fn.JaxDataset.step, out_shardings=(rows, whole))
    state, out = jds.init(), []
    for _ in range(steps):
        batch, state = step(jds, state)
        out.append({"rows": record(batch, mesh), "state": jds.host_state(state).position})
    checks: dict[str, Any] = {"out_shardings": out}
    if not scan:
        return checks

    def scan_steps(jds: Any, state: Any) -> Any:
        def body(state: Any, _: Any) -> Any:
            batch, state = jds.step(state)
            return state, jax.lax.with_sharding_constraint(batch, rows)

        state, batches = jax.lax.scan(body, state, None, length=steps)
        spread = NamedSharding(mesh, P(None, "data"))
        return jax.lax.with_sharding_constraint(batches, spread), state

    batches, state = jax.jit(scan_steps)(jds, jds.init())
    checks["constraint"] = {
        "rows": record(batches, mesh, axis=1),
        "state": jds.host_state(state).position,
    }
    return checks


def pmap_steps(jds: Any, count: int) -> list[Any]:
    """`STEPS` global batches read by `pmap`: device i steps the rows of shard i of `count`."""
    import jax

    def per_device(shard: Any, jds: Any, state: Any) -> Any:
        return jds.step_rows(state, shard, count)

    step = functools.partial(jax.pmap(per_device, in_axes=(0, None, None)), np.arange(count))
    state, out = jds.init(), []
    for _ in range(STEPS):
        rows, states = step(jds, state)
        positions = {
            jds.host_state(jax.tree.map(lambda f, i=i: f[i], states)) for i in range(count)
        }
        assert len(positions) == 1, f"the devices' states differ: {positions}"
        state = jax.tree.map(lambda field: field[0], states)
        leaves = jax.tree.map(np.asarray, rows)  # axis 0: the device
        out.append({"rows": leaves, "state": positions.pop().position})
    return out


def run_alone() -> dict[str, Any]:
    """Every check on this process's 4 devices, and the resumes on 2 and 1."""
    import jax

    devices = jax.devices()
    assert len(devices) == 4, devices
    mesh = mesh_of(devices)
    result: dict[str, Any] = {}
    for name, ds in pipelines().items():
        jds = fn.to_jax(ds)
        checks = jit_checks(jds, mesh, STEPS, scan=True)
        checks["shard_map"], _ = shard_map_steps(jds, jds.init(), mesh, STEPS)
        checks["pmap"] = pmap_steps(jds, 4)
        first, state = shard_map_steps(jds, jds.init(), mesh, RESUME_AFTER)
        saved = json.dumps(fn.state_to_dict(jds, state))  # as a checkpoint holds it
        for count in (2, 1):
            restored = fn.state_from_dict(jds, json.loads(saved))
            later, _ = shard_map_steps(
                jds, restored, mesh_of(devices[:count]), STEPS - RESUME_AFTER
            )
            checks[f"resumed_on_{count}"] = first + later
        result[name] = checks
    return result


def run_distributed() -> dict[str, Any]:
    """The jit and shard_map checks on the global mesh of every process's devices."""
    import jax

    mesh = mesh_of(jax.devices())  # in process order: process p's devices are 2p and 2p + 1
    result: dict[str, Any] = {}
    for name, ds in pipelines().items():
        jds = fn.to_jax(ds)
        # Few steps: the partitioned jit syncs the devices at each round of the shuffle's
        # cycle walking, slow between processes on a CPU; shard_map runs without collectives.
        checks = jit_checks(jds, mesh, DISTRIBUTED_JIT_STEPS, scan=False)
        checks["shard_map"], _ = shard_map_steps(jds, jds.init(), mesh, STEPS)
        result[name] = checks
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--process-id", type=int, default=None)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    import jax

    if args.process_id is None:
        result = {"process": 0, "local": [d.id for d in jax.devices()], "checks": run_alone()}
    else:
        jax.distributed.initialize(
            coordinator_address=f"localhost:{args.port}",
            num_processes=args.num_processes,
            process_id=args.process_id,
            initialization_timeout=60,
        )
        try:
            assert jax.process_index() == args.process_id, jax.process_index()
            assert jax.device_count() == args.devices * args.num_processes, jax.devices()
            checks = run_distributed()
            local = [d.id for d in jax.local_devices()]
        finally:
            jax.distributed.shutdown()
        result = {"process": args.process_id, "local": local, "checks": checks}
    with open(args.output, "wb") as file:
        pickle.dump(result, file)


if __name__ == "__main__":
    main()
