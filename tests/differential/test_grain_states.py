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
from absl import flags

import grainfn
import grainfn.checkpoint
from grainfn import fn
from grainfn._src.grain_states.streams import from_grain, to_grain

from support.registry import kinds_in, leaf_kinds, names

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
    "limit": lambda m, ds: m.experimental.LimitIterDataset(ds.to_iter_dataset(), 25),
    "repeat": lambda m, ds: m.experimental.RepeatIterDataset(
        ds.slice(slice(6)).to_iter_dataset(), 3
    ),
    "zip": lambda m, ds: m.experimental.ZipIterDataset(
        [ds.to_iter_dataset(), ds.to_iter_dataset().map(lambda x: -x)]
    ),
    "window shuffle": lambda m, ds: m.experimental.WindowShuffleIterDataset(
        ds.to_iter_dataset(), window_size=5, seed=7
    ),
    "flat_map": lambda m, ds: m.experimental.FlatMapIterDataset(ds.to_iter_dataset(), twice(m)),
    "first-fit packing": lambda m, ds: m.experimental.FirstFitPackIterDataset(
        ds.map(as_tokens).to_iter_dataset(), length_struct={"tokens": 6}, num_packing_bins=3
    ),
    "best-fit packing": lambda m, ds: m.experimental.BestFitPackIterDataset(
        ds.map(as_tokens).to_iter_dataset(), length_struct={"tokens": 6}, num_packing_bins=3
    ),
    "rebatch": lambda m, ds: m.experimental.RebatchIterDataset(ds.to_iter_dataset().batch(3), 2),
    "interleave": lambda m, ds: m.experimental.InterleaveIterDataset(
        [ds.slice(slice(k, None, 3)).to_iter_dataset() for k in range(3)] + [ds.to_iter_dataset()],
        cycle_length=2,
    ),
    "interleave of a dataset of datasets": lambda m, ds: m.experimental.InterleaveIterDataset(
        m.MapDataset.range(3).map(lambda k: ds.slice(slice(k, None, 3)).to_iter_dataset()),
        cycle_length=2,
    ),
    "iter seed, random_map": lambda m, ds: ds.to_iter_dataset().seed(5).random_map(add_draw),
    "thread prefetch": lambda m, ds: m.experimental.ThreadPrefetchIterDataset(
        ds.to_iter_dataset().map(lambda x: x * 2), prefetch_buffer_size=3
    ),
    "with options": lambda m, ds: m.experimental.WithOptionsIterDataset(
        ds.to_iter_dataset().filter(lambda x: x % 5),
        m.experimental.DatasetOptions(filter_raise_threshold_ratio=0.5),
    ),
}


ELSEWHERE: dict[str, str] = {
    "ConcatThenSplitStream": "test_grain_pipeline_states.py, concat-then-split states",
    "ParquetFileStream": "test_grain_pipeline_states.py, Parquet states",
    "TFRecordStream": "test_tfrecord_grain.py, states holding Grain's offset",
    "GrainWorkerOrderStream": "test_worker_order_grain.py (it starts Grain's worker processes)",
    "IterableStream": "tests/stages/test_iterable_state.py, Grain's state of a user iterator",
    "PrefetchedStream": (
        "here: test_a_stage_whose_grain_state_grainfn_cannot_write_is_named and (slow) "
        "test_grains_mp_prefetch_state_is_refused_saying_why"
    ),
    "PutOnDeviceStream": "no Grain dataset twin: Grain puts an iterator's elements on device",
    "RayPrefetchedStream": "no Grain twin",
    "CachedStream": (
        "not yet Grain's: Grain's CacheIterDataset has a state of its own ({'parent', "
        "'position', 'cache_filled'}), which grainfn's cache, its parent's state, neither reads "
        "nor writes"
    ),
}
"""The stages declaring a grain_state that no pipeline here covers: where each is, or why not."""


def test_every_stage_declaring_a_grain_state_is_covered() -> None:
    reached = set().union(*(kinds_in(pipeline(grainfn, name)) for name in PIPELINES))
    declaring = {kind for kind in leaf_kinds("stream") if kind.grain_state is not None}
    missing = set(names(declaring - reached)) - set(ELSEWHERE)
    assert not missing, f"stages declaring a grain_state that nothing covers: {sorted(missing)}"
    assert set(ELSEWHERE) <= set(names(declaring - reached)), "ELSEWHERE names one covered here"


class GrainTwice(grain.experimental.FlatMapTransform):
    """Each element and its negation."""

    max_fan_out = 2

    def flat_map(self, x: int) -> list[int]:
        return [x, -x]


class Twice(grainfn.experimental.FlatMapTransform):
    """Each element and its negation."""

    max_fan_out = 2

    def flat_map(self, x: int) -> list[int]:
        return [x, -x]


def twice(module: Any) -> Any:
    return GrainTwice() if module is grain else Twice()


def as_tokens(x: int) -> dict[str, np.ndarray]:
    return {"tokens": np.arange(x % 4 + 1, dtype=np.int32) + x}


def pipeline(module: Any, name: str) -> Any:
    return PIPELINES[name](module, module.MapDataset.range(40).seed(1).shuffle())


def plain(element: Any) -> Any:
    if isinstance(element, dict):
        return {key: plain(value) for key, value in element.items()}
    if isinstance(element, (tuple, list)):
        return [plain(value) for value in element]
    return np.asarray(element).tolist()


def as_lists(elements: Any) -> list[Any]:
    return [plain(e) for e in elements]


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("taken", [0, 1, 7, 16])
def test_a_grain_state_continues_in_grainfn_with_grains_next_elements(
    name: str, taken: int
) -> None:
    theirs = iter(pipeline(grain, name))
    for _ in range(taken):
        if next(theirs, None) is None:
            break  # a short pipeline: its state at the end
    state = theirs.get_state()
    ours = iter(pipeline(grainfn, name))
    ours.set_state(state)
    assert as_lists(ours) == as_lists(theirs)


@pytest.mark.parametrize("name", PIPELINES)
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


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("taken", [0, 1, 7, 16, 40])
def test_a_state_written_for_grain_continues_in_grain_as_grain_would(name: str, taken: int) -> None:
    ours, theirs = iter(pipeline(grainfn, name)), iter(pipeline(grain, name))
    ended = False
    for _ in range(taken):
        ended = next(theirs, None) is None
        if next(ours, None) is None or ended:
            break  # a short pipeline: its state at the end, once both met it
    written = ours.grain_state()
    # Where an element's fan-out, a window or a parent batch just ended, Grain names the
    # position by the one that ended, grainfn by the next; after a repeat's last epoch Grain
    # keeps the parent at its end, grainfn at its start. Both continue alike; elsewhere the
    # states are equal.
    if name not in ("window shuffle", "flat_map", "rebatch") and not (name == "repeat" and ended):
        assert written == theirs.get_state()
    restored = iter(pipeline(grain, name))
    restored.set_state(written)
    expected = as_lists(theirs)
    assert as_lists(restored) == expected
    assert as_lists(ours) == expected


@pytest.mark.parametrize("name", ["to_iter_dataset", "mix of named components", "interleave"])
def test_an_orbax_checkpoint_written_in_grains_format_restores_into_grain(
    name: str, tmp_path: Path
) -> None:
    ours = iter(pipeline(grainfn, name))
    for _ in range(5):
        next(ours)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(5, args=grainfn.checkpoint.CheckpointSave(ours, grain_format=True))
        manager.wait_until_finished()
    expected = as_lists(ours)
    theirs = iter(pipeline(grain, name))
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(5, args=grain.checkpoint.CheckpointRestore(theirs))
    assert as_lists(restored) == expected


def test_a_stage_whose_grain_state_grainfn_cannot_write_is_named() -> None:
    options = grainfn.MultiprocessingOptions(num_workers=0)
    it = iter(grainfn.MapDataset.range(20).to_iter_dataset().mp_prefetch(options))
    with pytest.raises(ValueError, match=r"cannot write Grain's state for the stage 'mp_prefetch"):
        it.grain_state()
    packed = packed_and_batched()
    with pytest.raises(ValueError, match=r"write Grain's state for the stage .pack_and_batch"):
        to_grain(packed, packed.init())
    with pytest.raises(TypeError, match=r"grain_format=True\) needs a grainfn DatasetIterator"):
        grainfn.checkpoint.CheckpointSave(iter([1, 2]), grain_format=True)


def packed_and_batched() -> Any:
    """A stage whose Grain state is not read or written: the DataLoader's PackAndBatch."""
    operation = grainfn.experimental.PackAndBatchOperation({"x": 5}, batch_size=2)
    return operation.stream(fn.from_dataset(fn.range(4)))


def test_a_stage_whose_grain_state_does_not_determine_ours_is_named() -> None:
    with pytest.raises(ValueError, match=r"cannot be read for the stage .pack_and_batch"):
        from_grain(packed_and_batched(), {"parent": {"next_index": 1}})
    ds = grainfn.MapDataset.range(20).to_iter_dataset()
    with pytest.raises(ValueError, match=r"should hold 'next_index'.*another pipeline"):
        iter(ds).set_state({"position": 3})


@pytest.mark.slow
def test_grains_mp_prefetch_state_is_refused_saying_why() -> None:
    if not flags.FLAGS.is_parsed():  # Grain's worker processes read absl flags
        flags.FLAGS.mark_as_parsed()
    options = grain.MultiprocessingOptions(num_workers=2)
    theirs = iter(grain.MapDataset.range(20).to_iter_dataset().mp_prefetch(options))
    next(theirs)
    state = theirs.get_state()
    theirs.close()
    ours = (
        grainfn.MapDataset.range(20)
        .to_iter_dataset()
        .mp_prefetch(grainfn.MultiprocessingOptions(num_workers=2))
    )
    with pytest.raises(ValueError, match=r"state of its mp_prefetch, which splits the position"):
        iter(ours).set_state(state)
