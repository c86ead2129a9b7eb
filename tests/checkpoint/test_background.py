"""`DatasetIterator.save`/`load`: Orbax v1's StatefulCheckpointable, driven by Orbax and asyncio."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint.experimental.v1 as ocp
import pytest

import grainfn as grain
from grainfn._src.checkpoint import background


def test_iterators_are_stateful_checkpointables() -> None:
    it = iter(grain.MapDataset.range(3).to_iter_dataset())
    assert isinstance(it, ocp.StatefulCheckpointable)
    assert inspect.iscoroutinefunction(grain.DatasetIterator.save)
    assert inspect.iscoroutinefunction(grain.DatasetIterator.load)


def test_orbax_v1_saves_and_loads_an_iterator_beside_a_model(tmp_path: Path, pipelines) -> None:
    params = {"w": np.arange(6, dtype=np.float32)}
    it = iter(pipelines.mixed())
    pipelines.take(it, 4)
    response = ocp.save_checkpointables_async(tmp_path / "ckpt", {"model": params, "data": it})
    expected = pipelines.rest(it)  # iterating on while the save is written
    response.result()
    assert (tmp_path / "ckpt" / "data" / "process_0-of-1.json").exists()
    fresh = iter(pipelines.mixed())
    loaded = ocp.load_checkpointables(tmp_path / "ckpt", {"model": None, "data": fresh})
    assert loaded["data"] is fresh
    np.testing.assert_array_equal(loaded["model"]["w"], params["w"])
    assert pipelines.rest(fresh) == expected


def test_save_takes_the_state_before_returning_and_writes_when_awaited(
    tmp_path: Path, make_iterator, pipelines
) -> None:
    """`background.save`, which both iterator kinds' `save` return, takes the state at once."""
    it = make_iterator(pipelines.shuffled())
    pipelines.take(it, 2)
    writing = background.save(it, tmp_path)
    assert inspect.iscoroutine(writing)
    assert list(tmp_path.iterdir()) == []
    expected = pipelines.rest(it)
    asyncio.run(writing)
    assert [p.name for p in tmp_path.iterdir()] == ["process_0-of-1.json"]

    fresh = make_iterator(pipelines.shuffled())
    asyncio.run(background.load(fresh, tmp_path))
    assert pipelines.rest(fresh) == expected


def test_the_iterator_methods_are_the_same_pair(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.shuffled())
    pipelines.take(it, 5)

    class Creating:
        """A stand-in for Orbax's PathAwaitingCreation: the directory exists once awaited."""

        async def await_creation(self) -> Path:
            (tmp_path / "made").mkdir()
            return tmp_path / "made"

    async def save_then_load() -> list[Any]:
        writing = await it.save(Creating())
        expected = pipelines.rest(it)
        await writing
        fresh = iter(pipelines.shuffled())
        await (await fresh.load(tmp_path / "made"))
        return [expected, pipelines.rest(fresh)]

    expected, resumed = asyncio.run(save_then_load())
    assert resumed == expected != []


def test_load_refuses_missing_and_foreign_states_by_file(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.shuffled(seed=7))
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'process_0-of-1.json'} does not")):
        asyncio.run(background.load(it, tmp_path))
    asyncio.run(background.save(it, tmp_path))
    with pytest.raises(ValueError, match="does not fit this iterator: State belongs to another"):
        asyncio.run(background.load(iter(pipelines.shuffled(seed=8)), tmp_path))
