"""aligned: arrays whose data starts at a multiple of 64 bytes, and rows gathered into them."""

from __future__ import annotations

import jax
import numpy as np
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
