"""The array codec: numpy arrays as ArrayRecord records in `.npy` format, and back."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grainfn._src.formats.array_record.codec import decode_array, encode_array


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        dtype=st.one_of(hnp.integer_dtypes(), hnp.floating_dtypes(), hnp.complex_number_dtypes()),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    )
)
def test_encode_then_decode_is_the_identity(array: np.ndarray) -> None:
    for copy in (True, False):
        back = decode_array(encode_array(array), copy=copy)
        assert back.dtype == array.dtype and back.shape == array.shape
        np.testing.assert_array_equal(back, array)
        assert back.flags.writeable is copy


def test_decode_array_refuses_what_is_not_an_array_record() -> None:
    with pytest.raises(ValueError, match=r"not an array in \.npy format \(it starts with b'hello'"):
        decode_array(b"hello")
    record = encode_array(np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match=r"announces 4 element\(s\) of int32 \(16 bytes\) but 15"):
        decode_array(record[:-1])
    with pytest.raises(TypeError, match="array of Python objects"):
        encode_array(np.array([1, "a", None], dtype=object))


def test_a_record_is_exactly_what_np_save_writes_and_np_load_reads() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    record = encode_array(array)
    written = io.BytesIO()
    np.save(written, array, allow_pickle=False)
    assert record == written.getvalue()
    np.testing.assert_array_equal(np.load(io.BytesIO(record)), array)


def test_fortran_order_and_version_2_headers_are_read() -> None:
    fortran = np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    back = decode_array(encode_array(fortran))
    assert back.flags.f_contiguous
    np.testing.assert_array_equal(back, fortran)
    version_2 = io.BytesIO()
    np.lib.format.write_array(version_2, np.arange(3, dtype=np.uint8), version=(2, 0))
    np.testing.assert_array_equal(decode_array(version_2.getvalue()), [0, 1, 2])


def test_a_view_shares_the_records_memory() -> None:
    record = bytearray(encode_array(np.zeros(2, dtype=np.int8)))
    view = decode_array(record, copy=False)
    record[-1] = 7
    assert view.tolist() == [0, 7]
    assert decode_array(memoryview(record)).tolist() == [0, 7]


def test_a_header_of_python_objects_or_of_no_format_is_refused() -> None:
    objects = io.BytesIO()
    np.save(objects, np.array([None, 1], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"holds Python objects \(dtype object\)"):
        decode_array(objects.getvalue())
    broken = b"\x93NUMPY\x01\x00\x04\x00abc\n"
    with pytest.raises(ValueError, match=r"This record has an invalid \.npy header"):
        decode_array(broken)
