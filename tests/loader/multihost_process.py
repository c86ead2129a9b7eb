"""One JAX process of the two-process test in test_multihost.py (run as a script).

Usage: python multihost_process.py PROCESS_ID PORT OUTPUT_JSON

It joins JAX's distributed runtime on 127.0.0.1:PORT, reads its shard of a
DataLoader with ShardByJaxProcess (one worker process), saves the state
midway, resumes a fresh loader from it, builds global jax.Arrays from the two
processes' batches, and writes what it saw to OUTPUT_JSON.
"""

from __future__ import annotations

import json
import sys

NUM_RECORDS = 48
BATCH = 4


def make_loader() -> object:
    import grainfn

    return grainfn.load(
        list(range(NUM_RECORDS)),
        num_epochs=1,
        shuffle=True,
        seed=42,
        shard_options=grainfn.ShardByJaxProcess(drop_remainder=True),
        batch_size=BATCH,
        worker_count=1,
    )


def main(process_id: int, port: int, output: str) -> None:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    import grainfn

    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=2,
        process_id=process_id,
        initialization_timeout=60,
    )
    try:
        loader = make_loader()
        with iter(loader) as it:  # type: ignore[call-overload]
            head = [next(it) for _ in range(2)]
            state = it.get_state()
            rest = list(it)
        with iter(make_loader()) as resumed:  # type: ignore[call-overload]
            resumed.set_state(state)
            resumed_rest = list(resumed)

        local = head[0]
        global_batch = grainfn.sharding.make_global_array({"x": local})["x"]
        gathered = multihost_utils.process_allgather(global_batch, tiled=True)
        locals_gathered = multihost_utils.process_allgather(np.asarray(local), tiled=False)
        total = jax.jit(lambda a: a.sum())(global_batch)
        result = {
            "shard": [
                grainfn.ShardByJaxProcess().shard_index,
                grainfn.ShardByJaxProcess().shard_count,
            ],
            "records": [int(x) for batch in head + rest for x in batch],
            "resumed_equal": all(np.array_equal(a, b) for a, b in zip(rest, resumed_rest))
            and len(rest) == len(resumed_rest),
            "global_shape": list(global_batch.shape),
            "global_rows": np.asarray(gathered).tolist(),
            "local_batches": np.asarray(locals_gathered).tolist(),
            "global_sum": int(total),
        }
    finally:
        jax.distributed.shutdown()
    with open(output, "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
