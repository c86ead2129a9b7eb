"""Index math of slice, take and repeat against Python references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.index import slicing

bounds = st.one_of(st.none(), st.integers(-30, 30))
steps = st.one_of(st.none(), st.integers(-5, 5).filter(lambda s: s != 0))


@given(st.integers(0, 25), bounds, bounds, steps)
def test_slice_matches_python_slicing_in_every_epoch(n: int, start, stop, step) -> None:
    sl = slice(start, stop, step)
    first, stride, size = slicing.slice_params(sl, n)
    expected = list(range(n))[sl]
    assert size == len(expected)
    if size == 0:
        return
    indices = np.arange(3 * size)
    got = slicing.slice_indices(indices, first, stride, size, n)
    assert got.tolist() == [e + epoch * n for epoch in range(3) for e in expected]
    assert [slicing.slice_indices(int(i), first, stride, size, n) for i in indices] == got.tolist()


@given(st.lists(st.integers(-20, 19), min_size=1, max_size=10))
def test_take_matches_python_indexing(positions: list[int]) -> None:
    n = 20
    table = slicing.index_table(positions, n)
    expected = [list(range(n))[p] for p in positions]
    got = slicing.take_indices(np.arange(2 * len(positions)), table, n).tolist()
    assert got == expected + [e + n for e in expected]


def test_index_table_names_out_of_range_position() -> None:
    with pytest.raises(IndexError, match="slice position 7 is out of range"):
        slicing.index_table([0, 7], 5)
    with pytest.raises(TypeError, match="must be integers, got 'a'"):
        slicing.index_table(["a"], 5)


def test_addressable_guard() -> None:
    slicing.check_addressable(2**62, 10, 10)
    with pytest.raises(OverflowError, match="past the last addressable position"):
        slicing.check_addressable(10, 10, 2**63 - 1)


def test_contiguous_parts_cover_the_length_once_in_order() -> None:
    for length in range(0, 12):
        for parts in range(1, 5):
            together = [p for i in range(parts) for p in slicing.contiguous_part(length, i, parts)]
            assert together == list(range(length))
            sizes = [len(slicing.contiguous_part(length, i, parts)) for i in range(parts)]
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)  # the longer parts come first


def test_contiguous_parts_drop_the_remainder_when_asked() -> None:
    kept = [slicing.contiguous_part(11, i, 3, drop_remainder=True) for i in range(3)]
    assert kept == [range(0, 3), range(3, 6), range(6, 9)]


def test_repeat_indices_pass_through_or_fold_into_the_first_epoch() -> None:
    indices = np.arange(12)
    assert slicing.repeat_indices(indices, 5, True).tolist() == list(range(12))
    assert slicing.repeat_indices(indices, 5, False).tolist() == [i % 5 for i in range(12)]


def test_index_table_accepts_numpy_integers_and_wraps_negative_positions() -> None:
    table = slicing.index_table([np.int64(-1), np.int32(2), 0], 5)
    assert table.dtype == np.int64
    assert table.tolist() == [4, 2, 0]


def test_slicing_functions_trace_under_jax_jit() -> None:
    import jax
    import jax.numpy as jnp

    indices = np.arange(200, dtype=np.int64)
    jax_indices = jnp.arange(200, dtype=jnp.int32)
    first, stride, size = slicing.slice_params(slice(17, 2, -3), 40)
    sliced = jax.jit(lambda i: slicing.slice_indices(i, first, stride, size, 40))(jax_indices)
    np.testing.assert_array_equal(sliced, slicing.slice_indices(indices, first, stride, size, 40))

    for reseed in (True, False):
        repeated = jax.jit(lambda i, r=reseed: slicing.repeat_indices(i, 7, r))(jax_indices)
        np.testing.assert_array_equal(repeated, slicing.repeat_indices(indices, 7, reseed))

    table = np.array([3, 1, 4, 1, 5])
    taken = jax.jit(lambda i: slicing.take_indices(i, table, 9))(jax_indices)
    np.testing.assert_array_equal(taken, slicing.take_indices(indices, table, 9))
