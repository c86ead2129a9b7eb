"""States and Orbax checkpoints written by Grain 0.2.18, restored into the same grainfn pipeline.

A run moving from Grain to grainfn keeps its data position: after a Grain
iterator took some elements, grainfn's iterator set to Grain's state (or
restored from the Orbax checkpoint Grain wrote) yields exactly the elements
Grain would have yielded next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grain
import numpy as np
import orbax.checkpoint as ocp
import pytest

import grainfn
import grainfn.checkpoint

pytestmark = pytest.mark.grain


def add_draw(x: int, rng: np.random.Generator) -> int:
    return x + int(rng.integers(100))


PIPELINES = {
    "to_iter_dataset": lambda m, ds: ds.to_iter_dataset(),
    "map, filter, batch": lambda m, ds: (
        ds.to_iter_dataset().map(lambda x: x + 1).filter(lambda x: x % 3).batch(2)
    ),
    "random_map": lambda m, ds: ds.to_iter_dataset().random_map(add_draw, seed=3),
    "map_with_index": lambda m, ds: ds.to_iter_dataset().map_with_index(lambda i, x: i * 100 + x),
    "mix of a list": lambda m, ds: m.IterDataset.mix(
        [ds.to_iter_dataset(), m.MapDataset.range(100, 130).to_iter_dataset()], [1, 2]
    ),
    "mix of named components": lambda m, ds: m.IterDataset.mix(
        {"z": ds.to_iter_dataset(), "a": m.MapDataset.range(100, 130).to_iter_dataset()},
        {"z": 1, "a": 2},
    ),
    "filter over a mix, then batch": lambda m, ds: (
        m.IterDataset.mix([ds.to_iter_dataset(), ds.to_iter_dataset().map(lambda x: -x)], [1, 1])
        .filter(lambda x: x % 4 != 1)
        .batch(3)
    ),
}


def pipeline(module: Any, name: str) -> Any:
    return PIPELINES[name](module, module.MapDataset.range(40).seed(1).shuffle())


def as_lists(elements: Any) -> list[Any]:
    return [np.asarray(e).tolist() for e in elements]


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("taken", [0, 1, 7])
def test_a_grain_state_continues_in_grainfn_with_grains_next_elements(
    name: str, taken: int
) -> None:
    theirs = iter(pipeline(grain, name))
    for _ in range(taken):
        next(theirs)
    state = theirs.get_state()
    ours = iter(pipeline(grainfn, name))
    ours.set_state(state)
    assert as_lists(ours) == as_lists(theirs)


@pytest.mark.parametrize("name", ["map, filter, batch", "random_map", "mix of named components"])
def test_an_orbax_checkpoint_written_by_grain_restores_into_grainfn(
    name: str, tmp_path: Path
) -> None:
    theirs = iter(pipeline(grain, name))
    for _ in range(4):
        next(theirs)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(4, args=grain.checkpoint.CheckpointSave(theirs))
        manager.wait_until_finished()
    expected = as_lists(theirs)
    ours = iter(pipeline(grainfn, name))
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(4, args=grainfn.checkpoint.CheckpointRestore(ours))
    assert as_lists(restored) == expected


def test_a_stage_whose_grain_state_does_not_determine_ours_is_named() -> None:
    ds = grainfn.MapDataset.range(20).to_iter_dataset()
    windowed = grainfn.experimental.WindowShuffleIterDataset(ds, window_size=4, seed=1)
    with pytest.raises(ValueError, match=r"cannot be read for the stage 'window_shuffle"):
        iter(windowed).set_state({"parent": {"next_index": 3}, "window": 1})
    with pytest.raises(ValueError, match=r"should hold 'next_index'.*another pipeline"):
        iter(ds).set_state({"position": 3})
