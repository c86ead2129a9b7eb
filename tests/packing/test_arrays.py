"""Tests for grainfn._src.packing.arrays: the arrays of a packed block and its row order."""

import gc

import numpy as np
import pytest

from grainfn._src.packing import arrays
from grainfn._src.packing.arrays import Memory
from grainfn._src.packing.spec import pack_spec


def test_tile_rows_tiles_each_row_with_padding_elements_and_the_rest() -> None:
    pieces = arrays.tile_rows(np.array([0, 0, 1]), np.array([[3], [2], [4]]), [6], [2])
    assert pieces.elements.tolist() == [-1, 0, -1, 1, -1, -1, 2, -1]
    assert pieces.sizes[:, 0].tolist() == [0, 3, 1, 2, 0, 0, 4, 2]
    assert pieces.segments.tolist() == [0, 1, 0, 2, 0, 0, 1, 0]
    # Every row's pieces add up to the packed length.
    assert pieces.sizes[:, 0].sum() == 2 * 6


def test_tile_rows_of_several_features_aligns_each_on_its_own() -> None:
    pieces = arrays.tile_rows(np.array([0, 0]), np.array([[1, 2], [1, 2]]), [4, 6], [1, 3])
    assert pieces.sizes.tolist() == [[0, 0], [1, 2], [0, 1], [1, 2], [2, 1]]


def test_fill_writes_values_segment_ids_and_positions_with_padding() -> None:
    pieces = arrays.tile_rows(np.array([0, 0, 1]), np.array([[3], [2], [4]]), [6], [2])
    values = [np.arange(3), np.arange(2) + 10, np.arange(4) + 20]
    packed, segment_ids, positions = arrays.fill(values, pieces, 0, 2, 6, padding=-1)
    assert packed.tolist() == [[0, 1, 2, -1, 10, 11], [20, 21, 22, 23, -1, -1]]
    assert segment_ids.tolist() == [[1, 1, 1, 0, 2, 2], [1, 1, 1, 1, 0, 0]]
    assert positions.tolist() == [[0, 1, 2, 0, 0, 1], [0, 1, 2, 3, 0, 0]]
    assert (segment_ids.dtype, positions.dtype) == (np.int32, np.int32)


def test_fill_keeps_inner_axes_and_the_first_elements_dtype() -> None:
    pieces = arrays.tile_rows(np.array([0, 0]), np.array([[1], [2]]), [4], [1])
    values = [np.ones((1, 2), np.float32), np.full((2, 2), 7, np.int64)]
    packed, _, _ = arrays.fill(values, pieces, 0, 1, 4)
    assert packed.shape == (1, 4, 2)
    assert packed.dtype == np.float32
    assert packed[0, :, 0].tolist() == [1, 7, 7, 0]


def test_fill_names_the_feature_whose_inner_shapes_differ() -> None:
    pieces = arrays.tile_rows(np.array([0, 0]), np.array([[1], [1]]), [2], [1])
    with pytest.raises(ValueError, match=r"Feature 'tokens' has elements of different inner"):
        arrays.fill([np.ones((1, 2)), np.ones((1, 3))], pieces, 0, 1, 2, name="tokens")


def test_memory_reuses_a_buffer_only_once_nothing_made_from_it_is_left() -> None:
    memory = Memory()
    first = memory.take(16)
    row = first[:8]
    del first
    gc.collect()
    second = memory.take(16)
    assert not np.shares_memory(row, second)
    assert len(memory.free) == 0  # the first buffer is still seen through `row`
    del row, second
    gc.collect()
    assert len(memory.free) == 2  # both buffers came back
    third = memory.take(16)
    assert len(memory.free) == 1  # one of them is handed out again
    assert third.dtype == np.uint8 and third.size == 16 and third.flags.writeable


def test_memory_keeps_at_most_its_limit_and_gives_new_buffers_of_other_sizes() -> None:
    memory = Memory(keep=1)
    buffers = [memory.take(8) for _ in range(3)]
    del buffers
    gc.collect()
    assert len(memory.free) == 1
    assert memory.take(4).size == 4


def test_row_order_unshuffled_shuffled_and_grouped() -> None:
    plain = pack_spec("first_fit", {"x": 4}, 4, shuffle_bins=False)
    assert arrays.row_order(plain, {}, 4, 0) == [0, 1, 2, 3]
    shuffled = pack_spec("first_fit", {"x": 4}, 4, seed=5)
    expected = np.random.default_rng(5 + 7).permuted(np.arange(4)).tolist()
    assert arrays.row_order(shuffled, {}, 4, 7) == expected
    assert arrays.row_order(shuffled, {}, 1, 7) == [0]
    grouped = pack_spec("first_fit", {"x": 4}, 3, shuffle_bins_group_by_feature="x")
    rows = {"x": np.array([[5, 5, 0, 0], [1, 2, 0, 0], [3, 0, 0, 0]])}
    assert arrays.row_order(grouped, rows, 3, 0) == [1, 2, 0]  # means 1.5, 3, 5


def test_distinct_mean_counts_each_distinct_nonzero_value_once() -> None:
    assert arrays.distinct_mean(np.array([3, 3, 1, 0, 0])) == 2.0
    assert arrays.distinct_mean(np.array([4, 4, 4])) == 4.0
    assert arrays.distinct_mean(np.zeros(4)) == 0.0
