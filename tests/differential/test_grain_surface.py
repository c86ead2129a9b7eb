"""Behaviours of Grain's public surface that grainfn matches, each checked against Grain 0.2.18."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn

pytestmark = pytest.mark.grain


def add_draw(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.integers(1000)


@pytest.mark.parametrize("seed", [893_247_023_984, 2**64 - 1, 2**64 + 5])
def test_random_map_takes_any_seed_grain_takes_with_the_same_draws(seed: int) -> None:
    import grain

    ours = grainfn.MapDataset.range(8).random_map(add_draw, seed=seed)
    theirs = grain.MapDataset.range(8).random_map(add_draw, seed=seed)
    assert [int(ours[i]) for i in range(12)] == [int(theirs[i]) for i in range(12)]
    ours_iter = grainfn.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    theirs_iter = grain.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    assert [int(x) for x in ours_iter] == [int(x) for x in theirs_iter]


def test_negative_random_map_seeds_are_refused_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(3).random_map(add_draw, seed=-1)[0]
    with pytest.raises(ValueError, match="random_map seed must be an integer >= 0, got -1"):
        grainfn.MapDataset.range(3).random_map(add_draw, seed=-1)


def test_slice_of_an_integer_is_a_value_error_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(10).slice(5)
    with pytest.raises(ValueError, match=r"takes a Python slice, got 5; ds\[i\] reads one"):
        grainfn.MapDataset.range(10).slice(5)


def test_read_options_warn_when_the_buffer_is_smaller_than_the_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="grainfn"):
        grainfn.ReadOptions(num_threads=8, prefetch_buffer_size=4)
        grainfn.ReadOptions(num_threads=8, prefetch_buffer_size=0)  # read-ahead off: no warning
        grainfn.ReadOptions(num_threads=4, prefetch_buffer_size=4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "grainfn"]
    assert len(warnings) == 1
    assert "prefetch_buffer_size=4 is below num_threads=8" in warnings[0]


def test_a_subclass_keeps_its_parent_objects_like_grain() -> None:
    import grain

    for lib in (grain, grainfn):

        class Doubled(lib.MapDataset):  # type: ignore[name-defined,misc]
            def __init__(self, parent: Any) -> None:
                super().__init__(parent)

            def __len__(self) -> int:
                return len(self._parent)

            def __getitem__(self, index: int) -> Any:
                return self._parent[index] * 2

        parent = lib.MapDataset.range(4)
        doubled = Doubled(parent)
        assert doubled.parents[0] is parent
        assert [doubled[i] for i in range(4)] == [0, 2, 4, 6]
        assert list(doubled.map(lambda x: x + 1)) == [1, 3, 5, 7]


def test_the_migration_guide_lists_every_grain_name_and_grainfn_has_them() -> None:
    import importlib
    import re
    from pathlib import Path

    guide = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-grain.md"
    rows = re.findall(r"^\| `(grain[\w.]*)` \| (.*?) \| (.*?) \|$", guide.read_text(), re.M)
    listed = {module: re.findall(r"`(\w+)`", names) for module, names, _ in rows}
    absent = {"grain": {"monitoring", "proto"}, "grain.proto": {"execution_summary_pb2"}}
    assert set(listed) >= {"grain", "grain.experimental", "grain.python", "grain.transforms"}
    for module in listed:  # a package lists a submodule once it is imported
        importlib.import_module(module)
    for module, names in listed.items():
        theirs = importlib.import_module(module)
        assert names == sorted(n for n in dir(theirs) if not n.startswith("_")), module
        ours = None if module == "grain.proto" else importlib.import_module("grainfn" + module[5:])
        missing = {n for n in names if ours is None or not hasattr(ours, n)}
        assert missing == absent.get(module, set()), module


@pytest.mark.parametrize("next_index", [21, 30, 10**9])
def test_a_next_index_past_the_end_is_an_index_error_like_grain(next_index: int) -> None:
    import grain

    with pytest.raises(IndexError, match=f"next_index` {next_index} is out of range"):
        iter(grain.MapDataset.range(20).to_iter_dataset()).set_state({"next_index": next_index})
    ours = iter(grainfn.MapDataset.range(20).to_iter_dataset())
    with pytest.raises(IndexError, match=f"position is {next_index}, past the end") as error:
        ours.set_state({"next_index": next_index})
    assert isinstance(error.value, ValueError)  # as every state grainfn refuses
    ours.set_state({"next_index": 20})  # the end itself is a position, in both
    assert list(ours) == []


SHARED_MEMORY_BATCHES = {
    "map-level": lambda g: g.MapDataset.range(10).map(lambda x: {"x": x, "y": [x] * 3}).batch(3),
    "iter-level": lambda g: g.MapDataset.range(10).to_iter_dataset().batch(3, drop_remainder=True),
    "strings": lambda g: (
        g.MapDataset.source(["a", "bb" * 50, "c" * 300]).to_iter_dataset().batch(3)
    ),
    "batch_fn": lambda g: g.MapDataset.range(7).to_iter_dataset().batch(2, batch_fn=list),
    "Batch transform": lambda g: g.MapDataset.range(7).apply(g.transforms.Batch(batch_size=3)),
}


def as_lists(elements: Any) -> list[Any]:
    return [
        {k: np.asarray(v).tolist() for k, v in e.items()}
        if isinstance(e, dict)
        else np.asarray(e).tolist()
        for e in elements
    ]


@pytest.mark.parametrize("case", SHARED_MEMORY_BATCHES)
def test_enable_shared_memory_output_on_a_batch_changes_nothing_like_grain(case: str) -> None:
    import grain

    theirs, ours = SHARED_MEMORY_BATCHES[case](grain), SHARED_MEMORY_BATCHES[case](grainfn)
    before = list(ours)
    assert ours.enable_shared_memory_output() is None
    theirs.enable_shared_memory_output()
    assert as_lists(ours) == as_lists(before) == as_lists(theirs)
    if case == "strings":  # no string is cut short
        assert [len(s) for s in next(iter(ours))] == [1, 100, 300]


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_enable_shared_memory_output_keeps_the_element_spec_like_grain(
    drop_remainder: bool,
) -> None:
    import grain

    specs = []
    for module in (grain, grainfn):
        ds = module.MapDataset.range(10).to_iter_dataset().batch(3, drop_remainder=drop_remainder)
        ds.enable_shared_memory_output()
        spec = module.experimental.get_element_spec(ds)
        specs.append((spec.shape, spec.dtype))
    assert specs[0] == specs[1] == ((3 if drop_remainder else None,), np.int64)


def test_enable_shared_memory_output_then_mp_prefetch_gives_the_same_elements() -> None:
    ds = grainfn.MapDataset.range(12).to_iter_dataset().map(lambda x: np.full(4, x)).batch(5)
    expected = as_lists(ds)
    ds.enable_shared_memory_output()
    prefetched = ds.mp_prefetch(grainfn.multiprocessing.MultiprocessingOptions(num_workers=2))
    assert as_lists(prefetched) == expected


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.MapDataset.range(5),
        lambda g: g.MapDataset.range(5).batch(2).map(lambda x: x),
        lambda g: g.MapDataset.range(5).to_iter_dataset(),
        lambda g: g.MapDataset.range(5).to_iter_dataset().batch(2).filter(lambda x: True),
    ],
)
def test_only_a_batch_has_enable_shared_memory_output_like_grain(make: Any) -> None:
    import grain

    assert not hasattr(make(grain), "enable_shared_memory_output")
    assert not hasattr(make(grainfn), "enable_shared_memory_output")
    with pytest.raises(AttributeError, match="only a batch"):
        make(grainfn).enable_shared_memory_output()


SLICEABLE = {
    "range": lambda g, n: g.MapDataset.range(n),
    "range with start and step": lambda g, n: g.MapDataset.range(3, 3 + 2 * n, 2),
    "source": lambda g, n: g.MapDataset.source([f"r{i}" for i in range(n)]),
}


@pytest.mark.parametrize("kind", SLICEABLE)
def test_set_slice_reads_grains_part(kind: str) -> None:
    import grain

    for length, parts in [(21, 3), (10, 3), (2, 3), (7, 1), (0, 2), (100, 7)]:
        for part in range(parts):
            theirs, ours = SLICEABLE[kind](grain, length), SLICEABLE[kind](grainfn, length)
            sl = slice(part, None if part % 2 else length, parts)  # the stop is ignored
            theirs.set_slice(sl, sequential_slice=True)
            assert ours.set_slice(sl, sequential_slice=True) is None
            assert len(ours) == len(theirs)
            assert list(ours) == list(theirs)
            assert list(ours.to_iter_dataset()) == list(theirs.to_iter_dataset())
            if len(theirs):
                assert [ours[i] for i in range(3 * len(ours))] == [
                    theirs[i] for i in range(3 * len(theirs))
                ]


@settings(max_examples=40)
@given(length=st.integers(0, 300), parts=st.integers(1, 12), data=st.data())
def test_set_slice_of_a_range_equals_grain_hypothesis(length: int, parts: int, data: Any) -> None:
    import grain

    part = data.draw(st.integers(0, parts - 1))
    theirs, ours = grain.MapDataset.range(length), grainfn.MapDataset.range(length)
    theirs.set_slice(slice(part, None, parts), sequential_slice=True)
    ours.set_slice(slice(part, None, parts), sequential_slice=True)
    assert list(ours) == list(theirs)
    # The parts of all workers are the whole dataset, in order.
    pieces = []
    for i in range(parts):
        ds = grainfn.MapDataset.range(length)
        ds.set_slice(slice(i, None, parts), sequential_slice=True)
        pieces += list(ds)
    assert pieces == list(range(length))


@pytest.mark.parametrize("kind", SLICEABLE)
def test_set_slice_refuses_what_grain_refuses(kind: str) -> None:
    import grain

    cases: list[tuple[Any, bool, type[Exception]]] = [
        (slice(0, 1, 1), False, AssertionError),  # Grain's test
        (slice(3, None, 3), True, ValueError),
        (slice(-1, None, 3), True, ValueError),
        (slice(0, None, 0), True, ValueError),
        (slice(0, None, -2), True, ValueError),
        (slice(None, None, 3), True, TypeError),
        (slice(0, None, None), True, TypeError),
    ]
    for sl, sequential, error in cases:
        with pytest.raises(error):
            SLICEABLE[kind](grain, 10).set_slice(sl, sequential_slice=sequential)
        ours = SLICEABLE[kind](grainfn, 10)
        with pytest.raises(error):
            ours.set_slice(sl, sequential_slice=sequential)
        assert len(ours) == 10  # a refused call changes nothing
    with pytest.raises(ValueError, match="only a sequential slice"):  # also a ValueError
        SLICEABLE[kind](grainfn, 10).set_slice(slice(0, 1, 1))


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.MapDataset.range(5).map(lambda x: x),
        lambda g: g.MapDataset.range(5).shuffle(seed=1),
        lambda g: g.MapDataset.range(5)[1:],
        lambda g: g.MapDataset.range(5).to_iter_dataset().map(lambda x: x),
    ],
)
def test_only_a_source_or_a_range_has_set_slice_like_grain(make: Any) -> None:
    import grain

    assert hasattr(grain.MapDataset.range(5), "set_slice")
    assert hasattr(grainfn.MapDataset.range(5), "set_slice")
    assert not hasattr(make(grain), "set_slice")
    assert not hasattr(make(grainfn), "set_slice")
    with pytest.raises(AttributeError, match="set_slice"):
        make(grainfn).set_slice(slice(0, None, 2), sequential_slice=True)
    with pytest.raises(AttributeError, match=r"only a source .* \(this one ends in map\(abs\)\)"):
        grainfn.MapDataset.range(5).map(abs).set_slice(slice(0, None, 2), sequential_slice=True)


def test_set_slice_is_in_place_and_restarts_from_the_whole_source() -> None:
    ds = grainfn.MapDataset.source(list(range(10)))
    earlier = ds.map(lambda x: -x)  # built before: a value, it keeps reading all of it
    ds.set_slice(slice(1, None, 2), sequential_slice=True)
    assert list(ds) == [5, 6, 7, 8, 9]
    assert list(earlier) == [-x for x in range(10)]
    assert list(ds.map(lambda x: -x)) == [-5, -6, -7, -8, -9]
    ds.set_slice(slice(0, None, 5), sequential_slice=True)  # a part of the whole source
    assert list(ds) == [0, 1]
    it = iter(ds.to_iter_dataset())
    assert next(it) == 0
    state = it.get_state()
    assert list(it) == [1]
    it.set_state(state)
    assert list(it) == [1]
