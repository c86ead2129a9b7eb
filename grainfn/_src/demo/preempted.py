"""The training job the demo preempts: `python -m grainfn._src.demo.preempted CONFIG_JSON`.

It trains from scratch on the demo pipeline, saves a checkpoint (parameters
and data iterator, one Orbax `CheckpointManager` step) after
`checkpoint_step` steps, and trains on towards `steps` until the demo kills
it with SIGKILL. It reports on stdout, one JSON object per line: `started` (with
multiprocessing's temporary directory, which the demo removes after the kill),
one `step` per training step (`train.Step`'s fields), `saved` with the save
times once the checkpoint is committed, and `finished` if nobody killed it.

CONFIG_JSON holds `files`, `batch_size`, `seed`, `workers`, `steps`,
`checkpoint_step` and `checkpoint_dir` (see `runner._run_in`).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing.util
import sys
from typing import Any

from grainfn._src.demo import data, train


def emit(event: str, **fields: Any) -> None:
    """Writes one report line for the demo's parent process."""
    print(json.dumps({"event": event, **fields}), flush=True)


def main(argv: list[str]) -> int:
    """Trains as CONFIG_JSON (`argv[0]`) says; returns the exit status."""
    if len(argv) != 1:
        print("usage: python -m grainfn._src.demo.preempted CONFIG_JSON", file=sys.stderr)
        return 2
    config = json.loads(argv[0])

    def report(step: train.Step) -> None:
        emit("step", **dataclasses.asdict(step))

    dataset = data.pipeline(
        config["files"], config["batch_size"], config["seed"], config["workers"]
    )
    params = train.init_params(config["seed"])
    checkpoint_step = config["checkpoint_step"]
    with train.checkpoint_manager(config["checkpoint_dir"]) as manager, iter(dataset) as batches:
        emit("started", temp_dir=multiprocessing.util.get_temp_dir())
        params = train.train(batches, params, 0, checkpoint_step, report)
        call, committed = train.save(manager, checkpoint_step, params, batches)
        emit("saved", step=checkpoint_step, call=call, committed=committed)
        train.train(batches, params, checkpoint_step, config["steps"], report)
    emit("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
