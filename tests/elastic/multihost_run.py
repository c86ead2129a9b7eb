"""One JAX process of one phase of the elastic multihost test (tests/elastic/test_multihost.py).

Usage (from the repository root, with it on PYTHONPATH as the test sets it):

    python tests/elastic/multihost_run.py --process-id I --num-processes N --port P \
        --checkpoints DIR --output FILE [--restore-step S] [--steps K] [--save-step S] \
        [--workers W] [--num-logical-shards L] [--global-array]

The process joins JAX's distributed runtime on localhost:P (CPU backend) as
process I of N, builds `ElasticIterator(pipeline(), GLOBAL_BATCH_SIZE,
ShardOptions(I, N))`, restores it with Orbax from step S of DIR if asked,
takes K host batches (all that are left without --steps), saves at step
--save-step if asked, and pickles what it saw to FILE. With --global-array it
also turns its first host batch into global `jax.Array`s (`make_global_array`)
and records their addressable shards and their `process_allgather`. It
also records its final state and how many worker processes it had running.

`pipeline()` is imported by the test too, which computes the uninterrupted
single-process run from it; it imports no JAX.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
from pathlib import Path
from typing import Any

import numpy as np

import grainfn as grain
import grainfn.experimental as gx

GLOBAL_BATCH_SIZE = 8
NUM_LOGICAL_SHARDS = 4
PACKED_LENGTH = 8
B_OFFSET = 100_000


def source(offset: int, count: int, seed: int) -> grain.MapDataset[Any]:
    """`count` sequences, the `i`-th `offset + 100 * i + arange(n)` with n drawn from 1..6."""
    lengths = np.random.default_rng(seed).integers(1, 7, size=count)
    return grain.MapDataset.source(
        [
            {"tokens": (np.arange(n) + offset + 100 * i).astype(np.int32)}
            for i, n in enumerate(lengths)
        ]
    )


def keep_a(element: dict[str, np.ndarray]) -> bool:
    """Source a's filter (an iter-level one): drops the sequences of length 3."""
    return element["tokens"].size != 3


def keep_b(element: dict[str, np.ndarray]) -> bool:
    """Source b's filter (a map-level one): drops every third sequence."""
    return bool((element["tokens"][0] // 100) % 3 != 0)


def pipeline() -> grain.IterDataset[Any]:
    """Two filtered sources, a named iter-level mix, and first-fit packing; unbatched."""
    a = source(0, 160, seed=1).to_iter_dataset().filter(keep_a)
    b = source(B_OFFSET, 120, seed=2).filter(keep_b).to_iter_dataset()
    mixed = grain.IterDataset.mix({"a": a, "b": b}, {"a": 0.6, "b": 0.4})
    return gx.FirstFitPackIterDataset(
        mixed, length_struct={"tokens": PACKED_LENGTH}, num_packing_bins=2, seed=3
    )


def elastic_iterator(
    host: int, num_hosts: int, workers: int | None, num_logical_shards: int | None
) -> Any:
    """Host `host` of `num_hosts`'s ElasticIterator over `pipeline()`."""
    # adaptive=False: the reads in this host's own workers, which the test counts.
    options = None if workers is None else grain.MultiprocessingOptions(workers, adaptive=False)
    return gx.ElasticIterator(
        pipeline(),
        GLOBAL_BATCH_SIZE,
        grain.ShardOptions(host, num_hosts),
        multiprocessing_options=options,
        num_logical_shards=num_logical_shards,
    )


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--checkpoints", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--restore-step", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="default: to the end")
    parser.add_argument("--save-step", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--num-logical-shards", type=int, default=None)
    parser.add_argument("--global-array", action="store_true")
    return parser.parse_args()


def _take(it: Any, steps: int | None) -> list[dict[str, np.ndarray]]:
    if steps is None:
        return list(it)
    return [next(it) for _ in range(steps)]


def _global_array_record(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """The addressable shards of `make_global_array(batch)` and the gathered global batch."""
    from jax.experimental import multihost_utils

    from grainfn.sharding import make_global_array

    arrays = make_global_array(batch)
    shards = {
        name: [
            (shard.index[0].start, shard.index[0].stop, np.asarray(shard.data))
            for shard in array.addressable_shards
        ]
        for name, array in arrays.items()
    }
    gathered = multihost_utils.process_allgather(arrays, tiled=True)
    return {
        "shapes": {name: tuple(array.shape) for name, array in arrays.items()},
        "shards": shards,
        "gathered": {name: np.asarray(value) for name, value in gathered.items()},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """This process's part of the phase; JAX's distributed runtime is up."""
    import orbax.checkpoint as ocp

    import grainfn.checkpoint

    it = elastic_iterator(
        args.process_id, args.num_processes, args.workers, args.num_logical_shards
    )
    result: dict[str, Any] = {"process": args.process_id, "count": args.num_processes}
    with ocp.CheckpointManager(args.checkpoints.resolve()) as manager:
        if args.restore_step is not None:
            it = manager.restore(args.restore_step, args=grainfn.checkpoint.CheckpointRestore(it))
        result["batches"] = _take(it, args.steps)
        if args.global_array:
            result["global_array"] = _global_array_record(result["batches"][0])
        if args.save_step is not None:
            manager.save(args.save_step, args=grainfn.checkpoint.CheckpointSave(it))
            manager.wait_until_finished()
        result["state"] = it.get_state()
        result["worker_processes"] = len(multiprocessing.active_children())
    it.close()
    return result


def main() -> None:
    """Joins the distributed runtime, runs the phase, and writes the output file."""
    args = _parse()
    import jax

    jax.distributed.initialize(
        coordinator_address=f"localhost:{args.port}",
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=60,
    )
    try:
        assert jax.process_index() == args.process_id, jax.process_index()
        assert jax.process_count() == args.num_processes, jax.process_count()
        result = run(args)
    finally:
        jax.distributed.shutdown()
    with open(args.output, "wb") as file:
        pickle.dump(result, file)


if __name__ == "__main__":
    main()
