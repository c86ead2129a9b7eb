"""A process killed in the middle of a save leaves the previous checkpoint restorable."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

import grainfn as grain
import grainfn.checkpoint
from grainfn._src.checkpoint import files

from support.waiting import wait_until

# Saves step 1 (iterator after 5 batches, small model), then starts saving step 2
# (iterator after 10 batches, a 64 MB model). The iterator is the first item, so
# its small file is written while the model is still being copied and written; and
# once written, its writer holds step 2 open, so the kill always comes mid-save
# however the machine schedules the two processes.
CHILD = textwrap.dedent(
    """
    import sys
    import threading

    import numpy as np
    import orbax.checkpoint as ocp

    import grainfn as grain
    import grainfn.checkpoint
    from grainfn._src.checkpoint import files

    write_state = files.write_state

    def write_then_hold(directory, state, *args, **kwargs):
        path = write_state(directory, state, *args, **kwargs)
        if "2.orbax-checkpoint-tmp" in str(directory):
            open(sys.argv[2], "w").close()  # the file is complete
            threading.Event().wait()  # step 2 never commits: the parent kills us here
        return path

    files.write_state = write_then_hold

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


# Step 2's iterator file, in its item's temporary directory (Orbax renames it to "data"
# only once the item is complete).
ITERATOR_FILE = "2.orbax-checkpoint-tmp*/data*/process_0-of-1.json"


def dataset() -> grain.IterDataset:
    return grain.MapDataset.range(100).seed(5).shuffle().to_iter_dataset().batch(4)


@pytest.mark.slow
def test_a_save_killed_midway_leaves_the_last_complete_step(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    held = tmp_path / "step 2 held"
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), str(held)],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        wait_until(
            lambda: held.exists() or child.poll() is not None, "the child held step 2's save"
        )
        assert child.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]
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
    (written,) = root.glob(ITERATOR_FILE)
    assert files.read_state(written.parent, (0, 1)).data["state"]["position"] == 40

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
