"""shuffle: a new permutation of a dataset each epoch, Grain's for the same seed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn

from support import conformance


@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_shuffle_is_a_new_permutation_each_epoch(n: int, seed: int) -> None:
    ds = fn.shuffle(fn.range(n), seed=seed)
    epochs = [ds.get_many(range(e * n, (e + 1) * n)) for e in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(n))
    if n >= 8:
        assert epochs[0] != epochs[1] or epochs[1] != epochs[2]


def test_the_order_is_grains_for_the_same_seed() -> None:
    # grain.MapDataset.range(10).shuffle(seed=3)[i] for i in range(20), Grain 0.2.18.
    ds = fn.shuffle(fn.range(10), seed=3)
    assert ds.get_many(range(20)) == [4, 7, 0, 8, 2, 5, 3, 6, 1, 9, 6, 0, 4, 3, 2, 1, 9, 8, 7, 5]
    assert [ds.get(i) for i in (0, 13, 19)] == [4, 3, 5]


def test_a_seed_stage_upstream_gives_grains_derived_seed() -> None:
    # grain.MapDataset.range(10).seed(7).shuffle()[i] for i in range(10), Grain 0.2.18.
    ds = fn.shuffle(fn.seed(7, fn.range(10)))
    assert ds.get_many(range(10)) == [7, 9, 0, 8, 4, 2, 5, 6, 3, 1]
    assert ds.describe_stage() == f"shuffle(seed={ds.seed})"


def test_a_stream_cannot_be_shuffled() -> None:
    with pytest.raises(TypeError, match="needs random access"):
        fn.shuffle(fn.from_dataset(fn.range(10)), seed=0)  # type: ignore[arg-type]


test_conforms = conformance.conforms(
    conformance.Example("shuffle(seed=2)", lambda: fn.shuffle(fn.range(9), seed=2)),
)
