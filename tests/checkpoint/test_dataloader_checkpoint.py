"""DataLoader iterators through Orbax: the manager, a composite, the pytree form and v1.

A state saved with worker processes restores with another number of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint as ocp
import orbax.checkpoint.experimental.v1 as ocp_v1
import pytest

import grainfn as grain
import grainfn.checkpoint


class Square(grain.transforms.Map):
    def map(self, x: int) -> dict[str, Any]:
        return {"x": x, "square": np.int64(x * x)}


class Jitter(grain.transforms.RandomMap):
    def random_map(self, record: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        return {**record, "noise": rng.random()}


def loader(worker_count: int = 0, seed: int = 5) -> grain.DataLoader:
    return grain.DataLoader(
        data_source=list(range(50)),
        sampler=grain.IndexSampler(50, shuffle=True, num_epochs=2, seed=seed),
        operations=[Square(), Jitter(), grain.transforms.Batch(8)],
        worker_count=worker_count,
        shard_options=grain.NoSharding(),
    )


def plain(batches: list[dict[str, np.ndarray]]) -> list[dict[str, list[Any]]]:
    return [{key: value.tolist() for key, value in batch.items()} for batch in batches]


def take(it: Any, count: int) -> list[Any]:
    return plain([next(it) for _ in range(count)])


EXPECTED = plain(list(loader()))


def test_a_manager_saves_with_workers_and_restores_without(tmp_path: Path) -> None:
    with iter(loader(worker_count=2)) as it:
        assert take(it, 4) == EXPECTED[:4]
        with ocp.CheckpointManager(tmp_path) as manager:
            assert manager.save(4, args=grain.checkpoint.CheckpointSave(it))
            assert take(it, 2) == EXPECTED[4:6]  # reading on while the save is written
            manager.wait_until_finished()
    saved = json.loads((tmp_path / "4" / "default" / "process_0-of-1.json").read_text())
    assert saved["worker_count"] == 2 and saved["sampler"].startswith("IndexSampler(")
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(4, args=grain.checkpoint.CheckpointRestore(iter(loader())))
    assert plain(list(restored)) == EXPECTED[4:]


def test_a_composite_holds_the_loader_beside_a_model(tmp_path: Path) -> None:
    params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    it = iter(loader())
    take(it, 3)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(
            3,
            args=ocp.args.Composite(
                model=ocp.args.StandardSave(params), data=grain.checkpoint.CheckpointSave(it)
            ),
        )
        manager.wait_until_finished()
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(
            3,
            args=ocp.args.Composite(
                model=ocp.args.StandardRestore(),
                data=grain.checkpoint.CheckpointRestore(iter(loader(worker_count=1))),
            ),
        )
    np.testing.assert_array_equal(restored.model["w"], params["w"])
    with restored.data as data:
        assert plain(list(data)) == EXPECTED[3:]


def test_a_checkpoint_of_another_loader_is_refused(tmp_path: Path) -> None:
    it = iter(loader(seed=5))
    take(it, 2)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(2, args=grain.checkpoint.CheckpointSave(it))
        manager.wait_until_finished()
    refused = pytest.raises(ValueError, match=r"process_0-of-1\.json.*seed=5.*seed=6")
    with ocp.CheckpointManager(tmp_path) as manager, refused:
        manager.restore(2, args=grain.checkpoint.CheckpointRestore(iter(loader(seed=6))))


def test_the_pytree_form_rides_beside_the_model(tmp_path: Path) -> None:
    it = iter(loader(worker_count=2))
    take(it, 5)
    tree = grain.checkpoint.state_tree(it)
    it.close()
    assert tree["state"].dtype == np.int64
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(5, args=ocp.args.StandardSave({"params": np.ones(3), "data": tree}))
        manager.wait_until_finished()
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(5, args=ocp.args.StandardRestore())
    fresh = iter(loader())
    grain.checkpoint.set_state_tree(fresh, restored["data"])
    assert plain(list(fresh)) == EXPECTED[5:]


def test_orbax_v1_saves_and_loads_the_loader_iterator(tmp_path: Path) -> None:
    it = iter(loader())
    assert isinstance(it, ocp_v1.handlers.StatefulCheckpointable)
    take(it, 6)
    ocp_v1.save_checkpointables(tmp_path / "ckpt", {"data": it})
    fresh = iter(loader())
    ocp_v1.load_checkpointables(tmp_path / "ckpt", {"data": fresh})
    assert plain(list(fresh)) == EXPECTED[6:]
