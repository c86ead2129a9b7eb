"""DataLoader states written by Grain 0.2.18 continue in grainfn's DataLoader.

After Grain's DataLoader returned some elements, grainfn's loader of the same
spec, set to Grain's state (or restored from the Orbax checkpoint Grain
wrote), returns exactly what Grain returns next. Where Grain's order depends
on its worker count, the state is refused with a message naming the stage.
(With a FlatMap, Grain's DataLoader runs as a dataset pipeline and writes that
pipeline's state, which grainfn reads as any Grain dataset state.)
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import grain
import orbax.checkpoint as ocp
import pytest
from hypothesis import assume, example, given, note
from hypothesis import strategies as st

import grainfn
import grainfn.checkpoint
from grainfn._src.loader.samplers import shard_length

from support.loader_specs import (
    assert_same_elements,
    build_loader,
    build_sampler,
    loader_shard_count,
    loader_specs,
)

pytestmark = pytest.mark.grain

LIMIT = 40


def even(spec: tuple[Any, ...]) -> bool:
    """Whether Grain reads this shard's records exactly once (its uneven shards lose some)."""
    sampler, loader = build_sampler(grainfn, spec), build_loader(grainfn, spec)
    return shard_length(sampler, loader.shard_options) == len(sampler) // loader_shard_count(spec)


@given(loader_specs(), st.integers(0, 12))
# With a FlatMap, Grain's next_index counts records below its iter-level batch.
@example((5, (False, 1, None, None), (0, 1, False), [("batch", 2, False), ("flat_map", 1)]), 2)
# A remainder that drop_remainder dropped is no batch to stand after.
@example((1, (False, 1, None, (0, 1, False)), (0, 1, False), [("batch", 2, True)]), 1)
def test_a_grain_loader_state_continues_with_grains_next_elements(
    spec: tuple[Any, ...], taken: int
) -> None:
    assume(even(spec))
    theirs = iter(build_loader(grain, spec))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    note(json.loads(state))
    ours = iter(build_loader(grainfn, spec))
    ours.set_state(state)
    expected = list(itertools.islice(theirs, LIMIT))
    assert_same_elements(list(itertools.islice(ours, LIMIT)), expected)


def sharded_loader(module: Any, operations: list[Any], workers: int) -> Any:
    sampler = module.samplers.IndexSampler(
        30,
        shard_options=module.sharding.ShardOptions(1, 3),
        shuffle=True,
        num_epochs=2,
        seed=4,
    )
    return module.DataLoader(
        data_source=list(range(100, 130)),
        sampler=sampler,
        operations=operations,
        worker_count=workers,
    )


class Double(grain.transforms.Map):
    def map(self, x: int) -> int:
        return 2 * x


class OurDouble(grainfn.transforms.Map):
    def map(self, x: int) -> int:
        return 2 * x


@pytest.mark.slow
@pytest.mark.usefixtures("absl_flags_parsed")
@pytest.mark.parametrize("taken", [0, 7, 8])  # 8: a round of both workers complete
def test_a_state_of_grains_workers_continues_where_its_order_is_grainfns(taken: int) -> None:
    theirs = iter(sharded_loader(grain, [Double()], workers=2))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    expected = list(theirs)
    del theirs  # Grain's DataLoader iterator stops its workers when collected
    assert json.loads(state)["worker_count"] == 2
    for workers in (0, 2):
        ours = iter(sharded_loader(grainfn, [OurDouble()], workers))
        ours.set_state(state)
        assert list(ours) == expected
        ours.close()


@pytest.mark.slow
@given(loader_specs(), st.integers(0, 12))
def test_a_state_written_for_grains_loader_continues_as_grain_would(
    spec: tuple[Any, ...], taken: int
) -> None:
    assume(even(spec))
    assume(not any(op[0] == "flat_map" for op in spec[3]))  # Grain runs those as datasets
    ours = iter(build_loader(grainfn, spec))
    head = list(itertools.islice(ours, taken))
    written = ours.grain_state()
    note(json.loads(written))
    if len(head) == taken:  # at the end Grain names the last record returned, grainfn read
        theirs = iter(build_loader(grain, spec))
        list(itertools.islice(theirs, taken))
        assert json.loads(written) == json.loads(theirs.get_state())
    restored = iter(build_loader(grain, spec))
    restored.set_state(written)
    expected = list(itertools.islice(ours, LIMIT))
    assert_same_elements(list(itertools.islice(restored, LIMIT)), expected)


@pytest.mark.slow
@pytest.mark.usefixtures("absl_flags_parsed")
@pytest.mark.parametrize("taken", [0, 7, 8])
def test_a_state_written_for_grains_workers_continues_in_grain(taken: int) -> None:
    ours = iter(sharded_loader(grainfn, [OurDouble()], workers=0))
    list(itertools.islice(ours, taken))
    written = ours.grain_state(worker_count=2)
    theirs = iter(sharded_loader(grain, [Double()], workers=2))
    list(itertools.islice(theirs, taken))
    assert json.loads(written) == json.loads(theirs.get_state())
    del theirs
    restored = iter(sharded_loader(grain, [Double()], workers=2))
    restored.set_state(written)
    assert list(restored) == list(ours)
    del restored  # Grain's DataLoader iterator stops its workers when collected


def test_a_state_grain_would_read_in_another_order_is_not_written() -> None:
    ours = iter(sharded_loader(grainfn, [grainfn.transforms.Batch(2)], workers=0))
    next(ours)
    with pytest.raises(ValueError, match=r"cannot write Grain's DataLoader state for the stage"):
        ours.grain_state(worker_count=2)
    assert json.loads(ours.grain_state(worker_count=1))["last_seen_indices"] == {"0": 4}


@pytest.mark.slow
@pytest.mark.usefixtures("absl_flags_parsed")
def test_a_state_of_grains_workers_batching_their_own_records_is_refused() -> None:
    theirs = iter(sharded_loader(grain, [grain.transforms.Batch(2)], workers=2))
    next(theirs)
    state = theirs.get_state()
    del theirs  # Grain's DataLoader iterator stops its workers when collected
    ours = iter(sharded_loader(grainfn, [grainfn.transforms.Batch(2)], workers=0))
    with pytest.raises(ValueError, match=r"stage 'batch\(2, .*depends on the worker count"):
        ours.set_state(state)


def test_an_orbax_checkpoint_of_grains_dataloader_restores_into_grainfn(tmp_path: Path) -> None:
    operations = [Double(), grain.transforms.Batch(3)]
    theirs = iter(sharded_loader(grain, operations, workers=0))
    list(itertools.islice(theirs, 2))
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(2, args=grain.checkpoint.CheckpointSave(theirs))
        manager.wait_until_finished()
    expected = [b.tolist() for b in theirs]
    ours = iter(sharded_loader(grainfn, [OurDouble(), grainfn.transforms.Batch(3)], workers=0))
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(2, args=grainfn.checkpoint.CheckpointRestore(ours))
    assert [b.tolist() for b in restored] == expected


def test_a_grain_state_of_another_shard_is_refused_naming_the_index() -> None:
    state = json.loads(iter(sharded_loader(grainfn, [], workers=0)).get_state())
    grain_state = {
        **{k: state[k] for k in ("sampler", "data_source")},
        "version": 2,
        "last_seen_indices": {"0": 3},  # shard 1 of 3 reads 1, 4, 7, ...
        "last_worker_index": -1,
        "worker_count": 0,
    }
    ours = iter(sharded_loader(grainfn, [], workers=0))
    with pytest.raises(ValueError, match=r"sampler index 3, which shard 1 of 3 does not read"):
        ours.set_state(json.dumps(grain_state))
