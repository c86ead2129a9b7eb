"""A process killed in the middle of a save leaves the previous checkpoint restorable."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp

import grainfn as grain
import grainfn.checkpoint
from grainfn._src.checkpoint import files

# Saves step 1 (iterator after 5 batches, small model), then starts saving step 2
# (iterator after 10 batches, a 64 MB model). The iterator is the first item, so
# its small file is written while the model is still being copied and written.
CHILD = textwrap.dedent(
    """
    import sys

    import numpy as np
    import orbax.checkpoint as ocp

    import grainfn as grain
    import grainfn.checkpoint

    ds = grain.MapDataset.range(100).seed(5).shuffle().to_iter_dataset().batch(4)
    it = iter(ds)
    for _ in range(5):
        next(it)
    mgr = ocp.CheckpointManager(sys.argv[1])

    def save(step, model):
        mgr.save(step, args=ocp.args.Composite(
            data=grainfn.checkpoint.CheckpointSave(it), model=ocp.args.StandardSave(model)))

    save(1, {"w": np.zeros(4)})
    mgr.wait_until_finished()
    for _ in range(5):
        next(it)
    save(2, {"w": np.ones(16_000_000, np.float32)})
    mgr.wait_until_finished()
    print("step 2 finished before the kill", flush=True)
    """
)


def dataset() -> grain.IterDataset:
    return grain.MapDataset.range(100).seed(5).shuffle().to_iter_dataset().batch(4)


def test_a_save_killed_midway_leaves_the_last_complete_step(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 60
        while not list(root.glob("2.orbax-checkpoint-tmp*/data/process_0-of-1.json")):
            assert child.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, "step 2's temporary directory never appeared"
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert out == b""

    # The kill came mid-save: step 2 is a temporary directory, never renamed into place,
    # and the iterator's file was written only there, complete, with step 2's position.
    assert not (root / "2").exists()
    (temporary,) = root.glob("2.orbax-checkpoint-tmp*")
    assert files.read_state(temporary / "data", (0, 1)).data["state"]["position"] == 40

    uninterrupted = [batch.tolist() for batch in dataset()]
    with ocp.CheckpointManager(root) as mgr:
        assert mgr.all_steps() == [1]
        assert mgr.latest_step() == 1
        restored = mgr.restore(
            mgr.latest_step(),
            args=ocp.args.Composite(
                data=grainfn.checkpoint.CheckpointRestore(iter(dataset())),
                model=ocp.args.StandardRestore(),
            ),
        )
    np.testing.assert_array_equal(restored.model["w"], np.zeros(4))
    assert [batch.tolist() for batch in restored.data] == uninterrupted[5:]
