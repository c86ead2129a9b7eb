"""flat_map: map-level positions against a Python reference, and resumable streams."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn.testing import assert_resumable

from support import conformance


def parts(x: Any) -> list[Any]:
    return [x * 10 + j for j in range(x % 4)]


@settings(max_examples=50)
@given(st.integers(1, 30), st.integers(3, 6))
def test_dataset_positions_hold_the_parts_or_none(length: int, fan_out: int) -> None:
    ds = fn.flat_map(parts, fn.range(length), max_fan_out=fan_out)
    assert ds.length == length * fan_out
    expected = []
    for x in range(length):
        split = parts(x)
        expected += split + [None] * (fan_out - len(split))
    positions = list(range(2 * ds.length))
    assert ds.get_many(positions) == expected * 2
    assert [ds.get(i) for i in positions[::7]] == (expected * 2)[::7]
    assert list(fn.elements(ds)) == [p for x in range(length) for p in parts(x)]


def test_an_infinite_parent_keeps_an_infinite_length() -> None:
    ds = fn.flat_map(parts, fn.repeat(None, fn.range(5)), max_fan_out=3)
    assert ds.length == sys.maxsize
    assert ds.get_many([3, 4, 5]) == [10, None, None]


@pytest.mark.parametrize(
    "make",
    [
        lambda: fn.flat_map(parts, fn.from_dataset(fn.range(30))),
        lambda: fn.batch(3, fn.flat_map(parts, fn.from_dataset(fn.shuffle(fn.range(40), seed=2)))),
        lambda: fn.flat_map(parts, fn.filter(lambda x: x % 5, fn.from_dataset(fn.range(40)))),
        lambda: fn.flat_map(lambda x: [x] * 7, fn.limit(6, fn.from_dataset(fn.range(40)))),
    ],
)
def test_streams_resume_in_the_middle_of_an_element(make: Any) -> None:
    assert_resumable(make, resume_points=40)


def test_stream_states_point_before_the_element_being_split() -> None:
    stream = fn.flat_map(lambda x: [x] * 3, fn.from_dataset(fn.range(4)))
    it = fn.iterate(stream)
    next(it)
    assert it.state == fn.FlatMapState(taken=1, parent=fn.DatasetPosition(0))
    next(it), next(it)
    assert it.state == fn.FlatMapState(taken=0, parent=fn.DatasetPosition(1))


def test_bad_flat_maps_are_refused() -> None:
    with pytest.raises(ValueError, match="flat_map on a dataset needs max_fan_out"):
        fn.flat_map(parts, fn.range(3))
    with pytest.raises(ValueError, match="max_fan_out must be a positive integer, got 0"):
        fn.flat_map(parts, fn.range(3), max_fan_out=0)
    with pytest.raises(ValueError, match="cannot follow flat_map"):
        fn.batch(2, fn.flat_map(parts, fn.range(3), max_fan_out=3))
    too_many = fn.flat_map(lambda x: [x] * 5, fn.range(3), max_fan_out=2)
    with pytest.raises(ValueError, match="parent index 1 into 5 parts, more than max_fan_out=2"):
        too_many.get(2)


test_conforms = conformance.conforms(
    conformance.Example(
        "flat_map(twice, max_fan_out=2)",
        lambda: fn.flat_map(conformance.twice, fn.range(4), max_fan_out=2),
    ),
    conformance.Example(
        "flat_map(twice)",
        lambda: fn.flat_map(conformance.twice, conformance.numbers(4)),
    ),
)


def test_a_state_saved_under_the_record_s_former_name_reads() -> None:
    stream = fn.flat_map(lambda x: [x, x], fn.from_dataset(fn.range(5)))
    saved = fn.state_to_dict(stream, fn.FlatMapState(1, fn.DatasetPosition(1)))
    assert saved["state"]["kind"] == "FlatMapState"
    saved["state"]["kind"] = "SplitState"  # as grainfn wrote it before the record was renamed
    state = fn.state_from_dict(stream, saved)
    assert state == fn.FlatMapState(1, fn.DatasetPosition(1))
    assert list(fn.iterate(stream, state)) == [1, 2, 2, 3, 3, 4, 4]  # element 1 half taken
