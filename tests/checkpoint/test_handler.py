"""CheckpointSave / CheckpointRestore with Orbax's CheckpointManager, alone and beside a model."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint as ocp
import pytest

import grainfn.checkpoint
from grainfn._src.checkpoint import files
from grainfn.checkpoint import CheckpointHandler, CheckpointRestore, CheckpointSave


def test_the_args_are_registered_with_the_handler() -> None:
    assert ocp.args.get_registered_handler_cls(CheckpointSave) is CheckpointHandler
    assert ocp.args.get_registered_handler_cls(CheckpointRestore) is CheckpointHandler
    assert issubclass(CheckpointHandler, ocp.AsyncCheckpointHandler)
    assert CheckpointHandler.typestr() == "grainfn._src.checkpoint.handler.CheckpointHandler"


def test_a_manager_saves_and_restores_either_kind(tmp_path: Path, make_iterator, pipelines):
    it = make_iterator(pipelines.mixed())
    pipelines.take(it, 5)
    with ocp.CheckpointManager(tmp_path) as mgr:
        assert mgr.save(5, args=CheckpointSave(it))
        expected = pipelines.rest(it)  # iterating on while the save is written
        mgr.wait_until_finished()
    state_file = tmp_path / "5" / "default" / "process_0-of-1.json"
    assert json.loads(state_file.read_text())["state"]["kind"] == "MixState"
    with ocp.CheckpointManager(tmp_path) as mgr:
        assert mgr.latest_step() == 5
        fresh = make_iterator(pipelines.mixed())
        restored = mgr.restore(5, args=CheckpointRestore(fresh))
    assert restored is fresh
    assert pipelines.rest(restored) == expected
    if hasattr(fresh, "started_prefetch"):
        assert fresh.started_prefetch


def test_a_composite_holds_the_iterator_beside_a_model(tmp_path: Path, make_iterator, pipelines):
    params = {"dense": {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4)}}
    it = make_iterator(pipelines.shuffled())
    pipelines.take(it, 3)
    with ocp.CheckpointManager(tmp_path) as mgr:
        mgr.save(
            3,
            args=ocp.args.Composite(
                model=ocp.args.StandardSave(params), data=grainfn.checkpoint.CheckpointSave(it)
            ),
        )
        mgr.wait_until_finished()
    expected = pipelines.rest(it)
    assert (tmp_path / "3" / "data" / "process_0-of-1.json").exists()
    with ocp.CheckpointManager(tmp_path) as mgr:
        restored = mgr.restore(
            3,
            args=ocp.args.Composite(
                model=ocp.args.StandardRestore(),
                data=grainfn.checkpoint.CheckpointRestore(make_iterator(pipelines.shuffled())),
            ),
        )
    np.testing.assert_array_equal(restored.model["dense"]["w"], params["dense"]["w"])
    np.testing.assert_array_equal(restored.model["dense"]["b"], params["dense"]["b"])
    assert pipelines.rest(restored.data) == expected


def test_the_training_thread_only_takes_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bytes_iterator, pipelines
) -> None:
    """The blocking part of an async save is `get_state`; encoding and writing run elsewhere."""
    threads: dict[str, list[str]] = {"get_state": [], "write": []}
    it = bytes_iterator(pipelines.shuffled())
    get_state, write_state = it.get_state, files.write_state

    def recording_get_state() -> bytes:
        threads["get_state"].append(threading.current_thread().name)
        return get_state()

    def recording_write(*args: Any) -> Any:
        threads["write"].append(threading.current_thread().name)
        return write_state(*args)

    monkeypatch.setattr(it, "get_state", recording_get_state)
    monkeypatch.setattr(files, "write_state", recording_write)
    with ocp.CheckpointManager(tmp_path) as mgr:
        mgr.save(1, args=CheckpointSave(it))
        assert threads["get_state"] == [threading.current_thread().name]
        mgr.wait_until_finished()
    assert len(threads["write"]) == 1
    assert threads["write"][0] != threading.current_thread().name


def test_async_save_returns_a_commit_that_writes_only_when_awaited(
    tmp_path: Path, pipelines
) -> None:
    it = iter(pipelines.shuffled())
    pipelines.take(it, 2)
    commits = asyncio.run(CheckpointHandler().async_save(tmp_path, args=CheckpointSave(it)))
    expected = pipelines.rest(it)
    assert len(commits) == 1 and list(tmp_path.iterdir()) == []
    commits[0].result(timeout=30)
    commits[0].result(timeout=30)  # waiting again writes nothing more
    assert [p.name for p in tmp_path.iterdir()] == ["process_0-of-1.json"]
    fresh = iter(pipelines.shuffled())
    CheckpointHandler().restore(tmp_path, args=CheckpointRestore(fresh))
    assert pipelines.rest(fresh) == expected

    (cancelled,) = asyncio.run(
        CheckpointHandler().async_save(tmp_path / "x", args=CheckpointSave(it))
    )
    cancelled.cancel()
    with pytest.raises(concurrent.futures.CancelledError, match="iterator save was cancelled"):
        cancelled.result()
    assert not (tmp_path / "x").exists()


def test_a_synchronous_manager_saves_too(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.mixed())
    pipelines.take(it, 3)
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=False)
    with ocp.CheckpointManager(tmp_path, options=options) as mgr:
        mgr.save(3, args=CheckpointSave(it))
        assert (tmp_path / "3" / "default" / "process_0-of-1.json").exists()
        expected = pipelines.rest(it)
        fresh = mgr.restore(3, args=CheckpointRestore(iter(pipelines.mixed())))
    assert pipelines.rest(fresh) == expected


def test_the_handler_saves_and_restores_synchronously_too(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.shuffled())
    pipelines.take(it, 2)
    handler = CheckpointHandler()
    handler.save(tmp_path, args=CheckpointSave(it))
    expected = pipelines.rest(it)
    fresh = iter(pipelines.shuffled())
    assert handler.restore(tmp_path, args=CheckpointRestore(fresh)) is fresh
    assert pipelines.rest(fresh) == expected
    assert handler.metadata(tmp_path) is None
    with pytest.raises(TypeError, match="can only save an iterator with get_state and set_state"):
        handler.save(tmp_path, args=CheckpointSave([1, 2]))


def test_each_process_writes_and_reads_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pipelines
) -> None:
    it = iter(pipelines.shuffled())
    pipelines.take(it, 4)
    expected = pipelines.rest(iter(pipelines.shuffled()))[4:]
    with ocp.CheckpointManager(tmp_path) as mgr:
        monkeypatch.setattr(files, "current_process", lambda: (1, 2))
        mgr.save(4, args=CheckpointSave(it))
        mgr.wait_until_finished()
        assert [p.name for p in (tmp_path / "4" / "default").glob("*.json")] == [
            "process_1-of-2.json"
        ]
        fresh = iter(pipelines.shuffled())
        assert pipelines.rest(mgr.restore(4, args=CheckpointRestore(fresh))) == expected
        monkeypatch.setattr(files, "current_process", lambda: (0, 1))
        with pytest.raises(ValueError, match=r"process_0-of-1\.json does not exist") as error:
            mgr.restore(4, args=CheckpointRestore(iter(pipelines.shuffled())))
    assert "holds process_1-of-2.json: it was saved by another number of processes" in str(
        error.value
    )


def test_a_manager_refuses_corrupt_and_foreign_checkpoints(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.shuffled(seed=7))
    pipelines.take(it, 2)
    with ocp.CheckpointManager(tmp_path) as mgr:
        for step in (1, 2, 3):
            mgr.save(step, args=CheckpointSave(it))
        mgr.wait_until_finished()
        path = tmp_path / "1" / "default" / "process_0-of-1.json"
        path.write_text(path.read_text()[:-9])
        with pytest.raises(ValueError, match=re.escape(f"{path} is truncated")):
            mgr.restore(1, args=CheckpointRestore(iter(pipelines.shuffled())))
        path = tmp_path / "2" / "default" / "process_0-of-1.json"
        path.unlink()
        with pytest.raises(ValueError, match=re.escape(f"{path} does not exist")):
            mgr.restore(2, args=CheckpointRestore(iter(pipelines.shuffled())))
        path = tmp_path / "3" / "default" / "process_0-of-1.json"
        with pytest.raises(ValueError, match=re.escape(f"{path} does not fit this iterator")) as e:
            mgr.restore(3, args=CheckpointRestore(iter(pipelines.shuffled(seed=9))))
    assert "State belongs to another pipeline: stage line 3 is 'shuffle(seed=" in str(e.value)


@pytest.mark.grain
def test_a_grainfn_checkpoint_resumes_like_grain(tmp_path: Path) -> None:
    """The same code, checkpointed by Grain and by grainfn through a manager, resumes alike."""
    import grain

    import grainfn

    def build(g: Any) -> Any:
        ds = g.MapDataset.range(80).seed(11).shuffle().map(lambda x: x * 3)
        ds = ds.filter(lambda x: x % 2 == 0).to_iter_dataset().batch(5)
        return ds

    resumed = {}
    for name, module in (("grain", grain), ("grainfn", grainfn)):
        it = iter(build(module))
        for _ in range(3):
            next(it)
        with ocp.CheckpointManager(tmp_path / name) as mgr:
            mgr.save(3, args=module.checkpoint.CheckpointSave(it))
            mgr.wait_until_finished()
            fresh = mgr.restore(3, args=module.checkpoint.CheckpointRestore(iter(build(module))))
        resumed[name] = [batch.tolist() for batch in fresh]
    assert resumed["grainfn"] == resumed["grain"]
    assert resumed["grain"] == [batch.tolist() for batch in build(grain)][3:]
