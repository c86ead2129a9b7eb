"""slice: positions picked by a slice or a table, epoch by epoch; Grain's sequential parts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.loader.sharding import ShardOptions, even_split
from grainfn._src.stages.slice import sequential_part

from support import conformance
from support.reading import read


@given(st.lists(st.integers(), max_size=20), st.slices(25))
def test_slice_matches_list_slicing(items: list[int], sl: slice) -> None:
    ds = fn.slice(sl, fn.source(items))
    assert read(ds) == items[sl]


@given(st.lists(st.integers(), max_size=40), st.integers(1, 9), st.data())
def test_sequential_parts_split_like_even_split_and_cover_the_data(
    items: list[int], parts: int, data: st.DataObject
) -> None:
    pieces = []
    for part in range(parts):
        ds = sequential_part(
            slice(part, data.draw(st.none() | st.integers()), parts), fn.source(items)
        )
        start, stop = even_split(len(items), ShardOptions(part, parts))
        assert read(ds) == items[start:stop]
        pieces += read(ds)
    assert pieces == items


def test_slice_of_slice_composes_like_lists() -> None:
    items = list(range(30))
    ds = fn.slice(slice(None, None, -2), fn.slice(slice(3, 25, 3), fn.source(items)))
    assert read(ds) == items[3:25:3][::-2]


def test_each_epoch_of_a_slice_reads_the_same_epoch_of_its_parent() -> None:
    parent = fn.shuffle(fn.range(10), seed=1)
    ds = fn.slice(slice(1, 8, 3), parent)
    assert ds.length == 3
    first, second = parent.get_many(range(10)), parent.get_many(range(10, 20))
    assert ds.get_many(range(6)) == [first[1], first[4], first[7], second[1], second[4], second[7]]


def test_a_table_of_positions_picks_them_in_order_every_epoch() -> None:
    ds = fn.slice([3, 1, -1], fn.range(10))
    assert ds.length == 3
    assert ds.get_many(range(6)) == [3, 1, 9, 3, 1, 9]
    assert ds.describe_stage() == "slice(positions of length 3)"


def test_the_description_gives_start_stop_and_step() -> None:
    assert fn.slice(slice(1, 8, 3), fn.range(10)).describe_stage() == (
        "slice(start=1, stop=10, step=3)"
    )
    assert fn.slice(slice(5, 5), fn.range(10)).length == 0


def test_bad_slices_are_refused_naming_the_value() -> None:
    ds = fn.range(10)
    with pytest.raises(TypeError, match=r"slice start must be an integer or None, got 'a'"):
        fn.slice(slice("a", None), ds)
    with pytest.raises(TypeError, match=r"a slice or a sequence of integer positions, got 'ab'"):
        fn.slice("ab", ds)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="slice needs random access"):
        fn.slice(slice(1, 3), fn.from_dataset(ds))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"must be in \[0, step\) = \[0, 3\), got 3"):
        sequential_part(slice(3, None, 3), ds)


test_conforms = conformance.conforms(
    conformance.Example(
        "slice(start=1, stop=11, step=2)", lambda: fn.slice(slice(1, 10, 2), fn.range(10))
    ),
    conformance.Example("slice(positions of length 3)", lambda: fn.slice([3, 0, 2], fn.range(4))),
)
