"""Grain's in-place protocols against Grain 0.2.18: shared-memory batches, a source's set_slice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn

pytestmark = pytest.mark.grain


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
