"""Tests for grainfn._src.packing.bins: placing a block's elements in bins, and packing them."""

import numpy as np
import pytest

from grainfn._src.packing import bins
from grainfn._src.packing.bins import Block
from grainfn._src.packing.spec import pack_spec


def test_first_fit_takes_the_first_bin_where_every_feature_fits() -> None:
    assert bins.first_fit([[8, 3, 1]], [8], [4], 3) == 1
    assert bins.first_fit([[8, 3, 1], [0, 9, 0]], [8, 9], [4, 1], 3) == 2
    assert bins.first_fit([[8, 8]], [8], [4], 2) == -1
    assert bins.first_fit([[0, 0]], [8], [9], 2) == -1
    assert bins.first_fit([[0, 0]], [8], [4], 0) == -1  # no bin looked at


def test_best_fit_takes_the_fullest_bin_with_room_and_the_lowest_on_ties() -> None:
    assert bins.best_fit([[2, 6, 6, 1]], [8], [2], [2, 6, 6, 1], 4) == 1
    assert bins.best_fit([[2, 7, 6, 1]], [8], [2], [2, 7, 6, 1], 4) == 2  # bin 1 is too full
    assert bins.best_fit([[2, 6], [5, 0]], [8, 8], [2, 4], [7, 6], 2) == 1
    assert bins.best_fit([[8]], [8], [1], [8], 1) == -1


def test_as_sequence_gives_a_leading_length_axis() -> None:
    assert bins.as_sequence(5).tolist() == [5]
    assert bins.as_sequence(5).dtype == np.int64
    assert bins.as_sequence(True).dtype == np.int64  # a Python bool is an int, as in Grain
    assert bins.as_sequence(np.float32(2.5)).shape == (1,)
    assert bins.as_sequence([[1, 2], [3, 4]]).shape == (2, 2)


def spec(strategy: str = "first_fit", **options: object) -> object:
    return pack_spec(strategy, {"x": 4}, 2, shuffle_bins=False, **options)


def test_a_block_is_complete_when_an_element_fits_no_bin() -> None:
    block = Block(spec())
    assert [block.add({"x": np.arange(n)}) for n in (3, 1, 2, 4)] == [True, True, True, False]
    assert block.open == 2
    assert block.rows == [0, 0, 1]
    packed = block.pack()
    assert list(packed) == ["x", "x_positions", "x_segment_ids"]
    assert packed["x"].tolist() == [[0, 1, 2, 0], [0, 1, 0, 0]]
    assert packed["x_segment_ids"].tolist() == [[1, 1, 1, 2], [1, 1, 0, 0]]
    assert packed["x_positions"].tolist() == [[0, 1, 2, 0], [0, 1, 0, 0]]


def test_place_stops_at_the_first_element_that_fits_no_bin() -> None:
    block = Block(spec())
    elements = [{"x": np.arange(n)} for n in (4, 4, 1, 2)]
    assert block.place(elements) == 2
    assert block.place(elements[2:]) == 0


def test_best_fit_fills_the_fullest_bin() -> None:
    block = Block(spec("best_fit"))
    assert block.place([{"x": np.arange(n)} for n in (2, 3, 1)]) == 3
    assert block.rows == [0, 1, 1]  # 1 goes to the fuller bin 1 (3 used) not bin 0 (2 used)


def test_max_sequences_per_bin_and_alignment_limit_a_bin() -> None:
    limited = Block(spec(max_sequences_per_bin=1))
    assert limited.place([{"x": [1]}, {"x": [2]}, {"x": [3]}]) == 2
    aligned = Block(spec(pack_alignment_struct={"x": 2}))
    assert aligned.place([{"x": [1]}, {"x": [2]}, {"x": [3]}]) == 3
    assert aligned.pack()["x"].tolist() == [[1, 0, 2, 0], [3, 0, 0, 0]]


def test_listed_meta_features_are_the_rows_values() -> None:
    block = Block(spec(meta_features=["doc"]))
    block.place([{"x": [1, 2, 3], "doc": "a"}, {"x": [4], "doc": "b"}, {"x": [5, 6], "doc": "c"}])
    assert block.pack()["doc"] == [["a", "b"], ["c"]]


def test_nested_features_are_packed_leaf_by_leaf() -> None:
    block = Block(pack_spec("first_fit", {"t": {"b": 3, "a": 2}}, 1, shuffle_bins=False))
    block.place([{"t": {"a": [1], "b": [7, 8], "extra": 0}}, {"t": {"a": [2], "b": [9]}}])
    packed = block.pack()
    assert packed["t"]["a"].tolist() == [[1, 2]]
    assert packed["t"]["b"].tolist() == [[7, 8, 9]]
    assert packed["t_segment_ids"]["b"].tolist() == [[1, 1, 2]]


def test_bad_elements_name_the_feature_and_the_way_out() -> None:
    with pytest.raises(
        ValueError, match=r"feature 'x' has length 5, more than its packed length 4"
    ):
        Block(spec()).add({"x": np.arange(5)})
    with pytest.raises(ValueError, match=r"no feature 'x': packing needs every feature"):
        Block(spec()).add({"y": [1]})
    with pytest.raises(TypeError, match="Packing takes dict elements"):
        Block(spec()).add([1, 2])  # type: ignore[arg-type]
    nested = Block(pack_spec("first_fit", {"t": {"a": 2}}, 1))
    with pytest.raises(ValueError, match=r"feature t\['a'\] has length 3, more than its packed"):
        nested.add({"t": {"a": [1, 2, 3]}})
