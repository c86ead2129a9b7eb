"""get_next_index and set_next_index against Grain 0.2.18: the same index, the same elements."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn

from support.registry import kinds_in, leaf_kinds, names

pytestmark = pytest.mark.grain


def draw(x: int, rng: np.random.Generator) -> int:
    return int(x * 1000 + rng.integers(100))


PIPELINES = {
    "range": lambda g: g.MapDataset.range(10).to_iter_dataset(),
    "shuffled": lambda g: g.MapDataset.range(10).shuffle(seed=1).to_iter_dataset(),
    "map": lambda g: g.MapDataset.range(10).to_iter_dataset().map(lambda x: x * 10),
    "map-level filter": lambda g: (
        g.MapDataset.range(10).filter(lambda x: x % 2 == 0).to_iter_dataset()
    ),
    "batch": lambda g: g.MapDataset.range(10).to_iter_dataset().batch(3),
    "limit": lambda g: g.experimental.LimitIterDataset(g.MapDataset.range(10).to_iter_dataset(), 5),
    "random_map": lambda g: g.MapDataset.range(10).to_iter_dataset().random_map(draw, seed=1),
    "map_with_index": lambda g: (
        g.MapDataset.range(10).to_iter_dataset().map_with_index(lambda i, x: (i, x))
    ),
    "interleave of one dataset": lambda g: g.experimental.InterleaveIterDataset(
        [g.MapDataset.range(10).shuffle(seed=2).to_iter_dataset()], cycle_length=1
    ),
    "interleave of one dataset, more slots, batched": lambda g: (
        g.experimental.InterleaveIterDataset(
            [g.MapDataset.range(10).to_iter_dataset().map(lambda x: x * 2)], cycle_length=3
        ).batch(2)
    ),
    "interleave of a dataset of one dataset": lambda g: g.experimental.InterleaveIterDataset(
        g.MapDataset.range(1).map(lambda i: g.MapDataset.range(10).to_iter_dataset()),
        cycle_length=2,
    ),
    "iter seed, random_map": lambda g: (
        g.MapDataset.range(10).to_iter_dataset().seed(4).random_map(draw)
    ),
    "thread prefetch": lambda g: g.experimental.ThreadPrefetchIterDataset(
        g.MapDataset.range(10).to_iter_dataset().map(lambda x: x + 1), prefetch_buffer_size=2
    ),
    "seed and mp_prefetch": lambda g: (
        g.MapDataset.range(10)
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .mp_prefetch(g.MultiprocessingOptions(num_workers=0))
    ),
}


NOT_COMPARED: dict[str, str] = {
    "GrainWorkerOrderStream": (
        "Grain's worker order is its mp_prefetch with worker processes, too slow to start "
        "here; tests/grain_states/test_next_index.py checks the rule"
    ),
}
"""The stages with a next_index_rule that no pipeline here compares with Grain, each with why."""


def test_every_stage_with_a_next_index_rule_is_compared_with_grain() -> None:
    reached = set().union(*(kinds_in(make(grainfn)) for make in PIPELINES.values()))
    ruled = {kind for kind in leaf_kinds("stream") if kind.next_index_rule is not None}
    missing = set(names(ruled - reached)) - set(NOT_COMPARED)
    assert not missing, f"stages with a next_index_rule compared by no pipeline: {sorted(missing)}"
    assert set(NOT_COMPARED) <= set(names(ruled - reached)), "NOT_COMPARED names one compared"


def session(
    lib: Any, make: Any, skip: int, index: int, index_at_end: bool = True
) -> tuple[Any, ...]:
    it = iter(make(lib))
    for _ in range(skip):
        next(it)
    before = lib.experimental.get_next_index(it)
    try:
        lib.experimental.set_next_index(it, index)
    except Exception as error:
        return before, type(error).__name__
    rest = [np.asarray(x).tolist() for x in it]
    if not index_at_end:
        return before, rest
    return before, rest, lib.experimental.get_next_index(it)


@pytest.mark.parametrize("name", sorted(PIPELINES))
@pytest.mark.parametrize(("skip", "index"), [(0, 0), (2, 3), (1, 2), (3, 1)])
def test_next_index_matches_grain(name: str, skip: int, index: int) -> None:
    import grain

    make = PIPELINES[name]
    # Grain's index of an ended interleave is 0 again: see test_an_ended_interleave_...
    at_end = "interleave" not in name
    assert session(grainfn, make, skip, index, at_end) == session(grain, make, skip, index, at_end)


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.MapDataset.range(10).to_iter_dataset().filter(lambda x: x % 2 == 0),
        lambda g: g.IterDataset.mix([g.MapDataset.range(5).to_iter_dataset()] * 2),
    ],
)
def test_positions_that_are_not_one_index_are_refused_like_grain(make: Any) -> None:
    import grain

    for lib in (grain, grainfn):
        it = iter(make(lib))
        next(it)
        with pytest.raises(NotImplementedError):
            lib.experimental.get_next_index(it)


@pytest.mark.parametrize("cycle_length", [1, 2, 3])
def test_an_interleave_of_more_datasets_is_refused_like_grain(cycle_length: int) -> None:
    import grain

    for lib in (grain, grainfn):
        parts = [
            lib.MapDataset.range(5).to_iter_dataset(),
            lib.MapDataset.range(3).to_iter_dataset(),
        ]
        ds = lib.experimental.InterleaveIterDataset(parts, cycle_length=cycle_length)
        it = iter(ds)
        for what in ("get_next_index", "set_next_index"):
            with pytest.raises(
                NotImplementedError, match=f"{what} is not supported for .*Interleave"
            ):
                if what == "get_next_index":
                    lib.experimental.get_next_index(it)
                else:
                    lib.experimental.set_next_index(it, 0)
        assert list(it) == list(ds)  # the refused calls moved nothing


def test_an_interleave_of_one_dataset_follows_each_index_like_grain() -> None:
    import grain

    got, put = [], []
    for lib in (
        grain,
        grainfn,
    ):  # Grain's interleave_test: test_get_next_index, test_set_next_index
        ds = lib.experimental.InterleaveIterDataset(
            [lib.MapDataset.range(10).to_iter_dataset()], cycle_length=1
        )
        it = iter(ds)
        got.append([lib.experimental.get_next_index(it)])
        for _ in range(10):
            next(it)
            got[-1].append(lib.experimental.get_next_index(it))
        put.append([])
        for i in reversed(range(10)):
            lib.experimental.set_next_index(it, i)
            put[-1].append(next(it))
    assert got[0] == got[1] == list(range(11))
    assert put[0] == put[1] == list(reversed(range(10)))


def test_an_ended_interleave_of_one_dataset_keeps_its_index() -> None:
    # Grain forgets an ended dataset: its index is 0 again and set_next_index fails an
    # assertion; grainfn's index stays at the end, and set_next_index reads on from there.
    ds = grainfn.experimental.InterleaveIterDataset(
        [grainfn.MapDataset.range(4).to_iter_dataset()], cycle_length=1
    )
    it = iter(ds)
    assert list(it) == [0, 1, 2, 3]
    assert grainfn.experimental.get_next_index(it) == 4
    grainfn.experimental.set_next_index(it, 2)
    assert list(it) == [2, 3]
    with pytest.raises(IndexError):
        grainfn.experimental.set_next_index(it, 5)


def test_an_index_past_the_end_is_an_index_error_like_grain() -> None:
    import grain

    for lib in (grain, grainfn):
        it = iter(lib.MapDataset.range(10).to_iter_dataset().batch(2))
        with pytest.raises(IndexError):
            lib.experimental.set_next_index(it, 7)  # batch 7 starts at element 14
