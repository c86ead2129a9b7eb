"""aligned: arrays whose data starts at a multiple of 64 bytes, and rows gathered into them."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.core import aligned

DTYPES = st.sampled_from(["uint8", "int16", "int32", "int64", "float32", "float64", "bool"])
SHAPES = st.lists(st.integers(0, 5), max_size=3).map(tuple)


@given(SHAPES, DTYPES)
def test_empty_is_aligned_c_ordered_and_writable(shape: tuple[int, ...], dtype: str) -> None:
    array = aligned.empty(shape, dtype)
    assert array.shape == shape and array.dtype == np.dtype(dtype)
    assert array.flags.c_contiguous and array.flags.writeable
    assert array.size == 0 or array.ctypes.data % aligned.ALIGNMENT == 0  # none: no data


@given(st.integers(1, 6), SHAPES, DTYPES, st.data())
def test_take_rows_is_fancy_indexing_into_aligned_memory(
    rows: int, inner: tuple[int, ...], dtype: str, data: st.DataObject
) -> None:
    source = (np.arange(rows * int(np.prod(inner))) % 5).astype(dtype).reshape(rows, *inner)
    positions = np.array(data.draw(st.lists(st.integers(0, rows - 1), max_size=8)), np.int64)
    got = aligned.take_rows(source, positions)
    expected = source[positions]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected)
    assert got.flags.c_contiguous and got.flags.writeable
    assert got.size == 0 or got.ctypes.data % aligned.ALIGNMENT == 0
    assert not np.shares_memory(got, source)  # a copy: writing to it leaves the source as it was


def test_jax_uses_gathered_rows_on_the_cpu_without_a_copy() -> None:
    # What the alignment is for: jax's CPU client takes the gathered memory as it is.
    rows = aligned.take_rows(np.arange(4096, dtype=np.float32).reshape(64, 64), np.arange(64))
    on_device = jax.device_put(rows, jax.devices("cpu")[0])
    assert on_device.unsafe_buffer_pointer() == rows.ctypes.data
    assert np.array_equal(np.asarray(on_device), rows)


VIEWS = st.sampled_from(["as is", "flip last but one", "flip first", "step", "transpose"])


def view_of(array: np.ndarray, how: str) -> np.ndarray:
    """A view of `array` of its shape (`transpose` keeps it square), strided as `how` says."""
    if how == "flip last but one":
        return array[..., ::-1, :]  # a flipped image: runs of the last axis, in reverse order
    if how == "flip first":
        return array[::-1]
    if how == "step":
        return np.repeat(array, 2, axis=-1)[..., ::2]  # no contiguous run at all
    if how == "transpose" and array.shape[-1] == array.shape[-2]:
        return np.swapaxes(array, -1, -2)
    return array


@given(
    st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(1, 5)),
    DTYPES,
    st.lists(VIEWS, min_size=1, max_size=6),
)
def test_stack_is_np_stack_into_aligned_memory(
    shape: tuple[int, int, int, int], dtype: str, views: list[str]
) -> None:
    size = int(np.prod(shape))
    arrays = [
        view_of((np.arange(size) * (k + 1) % 251).astype(dtype).reshape(shape), how)
        for k, how in enumerate(views)
    ]
    arrays = [a for a in arrays if a.shape == arrays[0].shape]
    got, expected = aligned.stack(arrays), np.stack(arrays)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected)
    assert got.flags.c_contiguous and got.ctypes.data % aligned.ALIGNMENT == 0
    # Into a region of a larger buffer, as a worker's columns are written into shared memory.
    buffer = np.zeros(expected.nbytes + 3, np.uint8)
    out = buffer[3:].view(expected.dtype) if expected.itemsize == 1 else np.empty_like(expected)
    out = out.reshape(expected.shape)
    assert aligned.stack_into(out, arrays) is out
    assert np.array_equal(out, expected)


def test_stack_of_other_dtypes_or_shapes_is_numpys() -> None:
    rows = np.arange(2048, dtype=np.int32).reshape(32, 64)
    mixed = [rows, rows.astype(np.int64)]
    assert aligned.stack(mixed).dtype == np.stack(mixed).dtype == np.int64
    with pytest.raises(ValueError, match="same shape"):
        aligned.stack([rows, rows[:, :10]])
