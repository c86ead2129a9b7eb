"""The state as a pytree of int64 arrays: round trips, refusals, JAX and Orbax StandardSave."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

import grainfn as grain
from grainfn import fn
from grainfn.checkpoint import (
    set_state_tree,
    state_tree,
    stream_state_from_tree,
    stream_state_tree,
)


def test_the_tree_is_two_int64_arrays_of_one_shape_for_life(make_iterator, pipelines) -> None:
    it = make_iterator(pipelines.mixed())
    trees = [state_tree(it)]
    for _ in range(6):
        next(it)
        trees.append(state_tree(it))
    for tree in trees:
        assert sorted(tree) == ["fingerprint", "state"]
        assert tree["state"].dtype == tree["fingerprint"].dtype == np.int64
        assert tree["state"].shape == (4,) and tree["fingerprint"].shape == ()
        assert tree["fingerprint"] == trees[0]["fingerprint"]
    # MixState leaves in sorted-key order: components (two positions), position, stopped.
    state = json.loads(it.get_state()) if isinstance(it.get_state(), bytes) else it.get_state()
    components = [c["position"] for c in state["state"]["components"]]
    assert trees[-1]["state"].tolist() == [*components, state["state"]["position"], 0]
    assert len({tuple(t["state"].tolist()) for t in trees}) == len(trees)


def test_set_state_tree_resumes_either_kind(make_iterator, pipelines) -> None:
    it = make_iterator(pipelines.mixed())
    pipelines.take(it, 3)
    tree = state_tree(it)
    expected = pipelines.rest(it)
    fresh = make_iterator(pipelines.mixed())
    set_state_tree(fresh, tree)
    assert pipelines.rest(fresh) == expected
    set_state_tree(it, tree)  # an exhausted iterator goes back too
    assert pipelines.rest(it) == expected


def test_a_bool_leaf_round_trips(pipelines) -> None:
    it = iter(pipelines.mixed())
    all_elements = pipelines.rest(it)  # runs the mix until it stops
    tree = state_tree(it)
    assert tree["state"][-1] == 1  # MixState.stopped
    fresh = iter(pipelines.mixed())
    set_state_tree(fresh, tree)
    assert fresh.get_state() == it.get_state()
    assert all_elements and pipelines.rest(fresh) == []
    bad = {"fingerprint": tree["fingerprint"], "state": tree["state"].copy()}
    bad["state"][-1] = 2
    with pytest.raises(ValueError, match=r"leaf state\.stopped is a bool, so 0 or 1, but holds 2"):
        set_state_tree(fresh, bad)


def test_trees_of_other_pipelines_are_refused(make_iterator, pipelines) -> None:
    tree = state_tree(make_iterator(pipelines.shuffled(seed=7)))
    other = make_iterator(pipelines.shuffled(seed=8))
    with pytest.raises(
        ValueError, match=r"fingerprint .* is not this iterator's .*another pipeline"
    ):
        set_state_tree(other, tree)
    with pytest.raises(ValueError, match="holds 1 integers but this iterator's state has 4"):
        set_state_tree(make_iterator(pipelines.mixed()), tree)
    assert pipelines.take(other, 2) == pipelines.take(make_iterator(pipelines.shuffled(seed=8)), 2)


def test_loader_fields_are_in_the_fingerprint_but_the_worker_count_is_not(
    bytes_iterator, pipelines
) -> None:
    it = bytes_iterator(pipelines.shuffled(), sampler="sampler-A", workers=2)
    pipelines.take(it, 2)
    tree = state_tree(it)
    expected = pipelines.rest(it)
    with pytest.raises(ValueError, match="another pipeline, state version or loader configuration"):
        set_state_tree(bytes_iterator(pipelines.shuffled(), sampler="sampler-B"), tree)
    fresh = bytes_iterator(pipelines.shuffled(), sampler="sampler-A", workers=0)
    set_state_tree(fresh, tree)
    assert pipelines.rest(fresh) == expected


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ([1, 2], r"the dict \{'fingerprint': ..., 'state': ...\} .* got \[1, 2\] \(list\)"),
        ({"state": np.zeros(1, np.int64)}, r"got keys \['state'\]"),
        ({"state": np.zeros((1, 1), np.int64), "fingerprint": np.int64(0)}, "must be a 1-d"),
        ({"state": np.zeros(1), "fingerprint": np.int64(0)}, "1-d integer array, got float64"),
        ({"state": np.zeros(1, np.int32), "fingerprint": np.int64(0)}, "int32, not int64: its"),
        ({"state": np.zeros(1, np.int64), "fingerprint": np.zeros(2, np.int64)}, "must be a 0-d"),
    ],
)
def test_malformed_trees_are_refused(tree, message: str, pipelines) -> None:
    with pytest.raises(ValueError, match=message):
        set_state_tree(iter(pipelines.shuffled()), tree)


def test_only_grainfn_states_have_a_tree() -> None:
    class Foreign:
        def get_state(self) -> dict[str, int]:
            return {"next_index": 3}

        def set_state(self, state: dict[str, int]) -> None:
            raise AssertionError("not reached")

    with pytest.raises(ValueError, match=r"state_tree needs a grainfn iterator.*'next_index'"):
        state_tree(Foreign())
    with pytest.raises(ValueError, match="set_state_tree needs a grainfn iterator"):
        set_state_tree(Foreign(), {"fingerprint": np.int64(0), "state": np.zeros(0, np.int64)})


def test_the_tree_is_a_jax_pytree_and_survives_jax_arrays(pipelines) -> None:
    it = iter(pipelines.mixed())
    pipelines.take(it, 2)
    tree = state_tree(it)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    assert len(leaves) == 2
    with jax.enable_x64(True):
        as_jax = jax.tree_util.tree_map(jax.numpy.asarray, tree)
        copied = jax.jit(lambda t: t)(as_jax)
    assert isinstance(copied["state"], jax.Array)
    fresh = iter(pipelines.mixed())
    set_state_tree(fresh, jax.tree_util.tree_unflatten(treedef, jax.tree_util.tree_leaves(copied)))
    assert fresh.get_state() == it.get_state()
    with jax.enable_x64(False):
        truncated = jax.tree_util.tree_map(jax.numpy.asarray, tree)
    with pytest.raises(ValueError, match="int32, not int64: its values were truncated"):
        set_state_tree(fresh, truncated)


def test_the_tree_rides_in_a_model_pytree_through_standard_save(
    tmp_path: Path, make_iterator, pipelines
) -> None:
    params = {"w": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3), "b": np.zeros(3)}
    it = make_iterator(pipelines.mixed())
    uninterrupted = pipelines.rest(make_iterator(pipelines.mixed()))
    pipelines.take(it, 4)
    with ocp.CheckpointManager(tmp_path) as mgr:
        mgr.save(4, args=ocp.args.StandardSave({"params": params, "data": state_tree(it)}))
        mgr.wait_until_finished()
    with ocp.CheckpointManager(tmp_path) as mgr:
        restored = mgr.restore(4, args=ocp.args.StandardRestore())
    np.testing.assert_array_equal(restored["params"]["w"], params["w"])
    fresh = make_iterator(pipelines.mixed())
    set_state_tree(fresh, restored["data"])
    assert pipelines.rest(fresh) == uninterrupted[4:]


def test_the_core_form_works_on_state_records() -> None:
    stream = fn.mix([fn.from_dataset(fn.range(5)), fn.from_dataset(fn.range(10, 13))])
    it = fn.iterate(stream)
    for _ in range(4):
        next(it)
    tree = stream_state_tree(stream, it.state)
    assert stream_state_from_tree(stream, tree) == it.state
    other = fn.from_dataset(fn.range(5))
    with pytest.raises(ValueError, match="holds 4 integers but this iterator's state has 1"):
        stream_state_from_tree(other, tree)
    it = iter(grain.MapDataset.range(5).to_iter_dataset())
    next(it)
    assert stream_state_tree(it.core.stream, it.core.state)["state"].tolist() == [1]
