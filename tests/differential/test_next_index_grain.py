"""get_next_index and set_next_index against Grain 0.2.18: the same index, the same elements."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn

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
    "seed and mp_prefetch": lambda g: (
        g.MapDataset.range(10)
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .mp_prefetch(g.MultiprocessingOptions(num_workers=0))
    ),
}


def session(lib: Any, make: Any, skip: int, index: int) -> tuple[Any, ...]:
    it = iter(make(lib))
    for _ in range(skip):
        next(it)
    before = lib.experimental.get_next_index(it)
    try:
        lib.experimental.set_next_index(it, index)
    except Exception as error:
        return before, type(error).__name__
    rest = [np.asarray(x).tolist() for x in it]
    return before, rest, lib.experimental.get_next_index(it)


@pytest.mark.parametrize("name", sorted(PIPELINES))
@pytest.mark.parametrize(("skip", "index"), [(0, 0), (2, 3), (1, 2), (3, 1)])
def test_next_index_matches_grain(name: str, skip: int, index: int) -> None:
    import grain

    make = PIPELINES[name]
    assert session(grainfn, make, skip, index) == session(grain, make, skip, index)


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


def test_an_index_past_the_end_is_an_index_error_like_grain() -> None:
    import grain

    for lib in (grain, grainfn):
        it = iter(lib.MapDataset.range(10).to_iter_dataset().batch(2))
        with pytest.raises(IndexError):
            lib.experimental.set_next_index(it, 7)  # batch 7 starts at element 14
