"""rebatch: Grain's RebatchIterDataset output, resumable from a position inside a parent batch."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn.experimental import RebatchIterDataset
from grainfn.testing import assert_elements_equal, assert_resumable

from support import conformance

pytestmark = pytest.mark.grain

Pair = collections.namedtuple("Pair", ["ids", "weights"])


def make_batch(sizes: tuple[int, ...], index: int) -> dict[str, Any]:
    """Parent batch `index`: `sizes[index]` rows of a dict, a tuple and a namedtuple of arrays."""
    start = sum(sizes[:index])
    rows = np.arange(start, start + sizes[index])
    return {
        "x": rows.astype(np.int32),
        "pair": Pair(rows * 2, np.stack([rows, rows], axis=1).astype(np.float32)),
        "tuple": (rows.astype(np.int64),),
    }


class MakeBatch:
    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.sizes = sizes

    def __call__(self, index: int) -> dict[str, Any]:
        return make_batch(self.sizes, index)


@settings(max_examples=30)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=0, max_size=8).map(tuple),
    batch_size=st.integers(1, 9),
    drop_remainder=st.booleans(),
)
def test_rebatch_iter_dataset_matches_grain(
    sizes: tuple[int, ...], batch_size: int, drop_remainder: bool
) -> None:
    import grain as real

    def build(lib: Any, make: Any) -> Any:
        parent = lib.MapDataset.range(len(sizes)).map(MakeBatch(sizes)).to_iter_dataset()
        return make(parent, batch_size, drop_remainder=drop_remainder)

    ours = list(build(grain, RebatchIterDataset))
    theirs = list(build(real, real.experimental.RebatchIterDataset))
    assert_elements_equal(ours, theirs)
    rows = [b["x"] for b in ours]
    expected = np.arange(sum(sizes), dtype=np.int32)
    if drop_remainder:
        expected = expected[: len(expected) - len(expected) % batch_size]
    assert_elements_equal(np.concatenate(rows) if rows else expected[:0], expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda: fn.rebatch(3, fn.batch(4, fn.from_dataset(fn.range(23)))),
        lambda: fn.rebatch(7, fn.map(MakeBatch((3, 1, 5, 2, 6, 4)), fn.from_dataset(fn.range(6)))),
        lambda: fn.rebatch(2, fn.batch(5, fn.from_dataset(fn.range(19))), drop_remainder=True),
    ],
)
def test_rebatch_resumes_at_any_element(make: Any) -> None:
    count = len(list(fn.iterate(make())))
    assert_resumable(make, max_elements=count + 1, resume_points=count + 2)


def test_the_state_is_a_parent_state_and_an_offset() -> None:
    stream = fn.rebatch(3, fn.batch(4, fn.from_dataset(fn.range(10))))
    it = fn.iterate(stream)
    states = []
    for _ in range(4):
        next(it)
        states.append(it.state)
    position = fn.DatasetPosition
    assert states == [
        fn.RebatchState(3, position(0)),  # row 3 of the batch read from position 0 is next
        fn.RebatchState(2, position(4)),
        fn.RebatchState(1, position(8)),  # the batch [8, 9] follows position 8
        fn.RebatchState(0, position(10)),  # every batch used up
    ]


def test_one_piece_is_a_slice_and_several_are_concatenated() -> None:
    parent = np.arange(8).reshape(4, 2)
    stream = fn.rebatch(3, fn.from_dataset(fn.source([parent, parent])))
    first, second = list(fn.iterate(stream))[:2]
    assert np.shares_memory(first, parent)  # a view into the parent batch, as in Grain
    assert second.tolist() == [[6, 7], [0, 1], [2, 3]]


def read_rebatched(elements: list[Any], batch_size: int = 2) -> list[Any]:
    return list(fn.iterate(fn.rebatch(batch_size, fn.from_dataset(fn.source(elements)))))


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    parent = grain.MapDataset.range(5).to_iter_dataset().batch(2)
    for bad in (0, -3):
        with pytest.raises(ValueError, match=f"batch_size must be a positive integer, got {bad}"):
            RebatchIterDataset(parent, bad)
    with pytest.raises(TypeError, match=r"rebatch needs a grainfn Stream or Dataset, got \[1, 2\]"):
        fn.rebatch(2, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="leading batch dimension, but a leaf is 3 \\(int\\)"):
        read_rebatched([{"a": np.arange(2), "b": 3}])
    with pytest.raises(ValueError, match="parent batch of 0 rows"):
        read_rebatched([np.arange(3), np.arange(0)])
    with pytest.raises(ValueError, match=r"share their leading dimension, got .*\[2, 3\]"):
        read_rebatched([(np.arange(2), np.arange(3))])
    with pytest.raises(ValueError, match="different structure at the top level: a dict"):
        read_rebatched([{"a": np.arange(1)}, {"b": np.arange(1)}])
    stream = fn.rebatch(3, fn.batch(4, fn.from_dataset(fn.range(10))))
    with pytest.raises(ValueError, match="row 5 of a parent batch is next, but the batch has 4"):
        fn.iterate(stream, fn.RebatchState(5, fn.DatasetPosition(0)))


def test_a_dataset_of_batches_is_read_in_order() -> None:
    batches = fn.batch(4, fn.range(10))
    assert fn.rebatch(3, batches) == fn.rebatch(3, fn.from_dataset(batches))


def test_describe_stage_names_the_rebatch() -> None:
    parent = fn.from_dataset(fn.range(3))
    assert fn.rebatch(4, parent).describe_stage() == "rebatch(4)"
    assert fn.rebatch(4, parent, drop_remainder=True).describe_stage() == (
        "rebatch(4, drop_remainder=True)"
    )


test_conforms = conformance.conforms(
    conformance.Example("rebatch(3)", lambda: fn.rebatch(3, fn.batch(4, conformance.numbers(10)))),
)
