"""Numpy arrays as ArrayRecord records, in numpy's own self-describing `.npy` format.

A record written from an array is exactly the bytes `np.save(file, array,
allow_pickle=False)` writes: a header giving the dtype, the shape and the
memory order, then the data. So any numpy reads it back (`np.load` on
`io.BytesIO(record)`), and `decode_array` reads it faster by parsing each
distinct header once.
"""

from __future__ import annotations

import functools
import io
import math
from typing import Any

import numpy as np

_MAGIC = b"\x93NUMPY"


def encode_array(array: Any) -> bytes:
    r"""`array` as the bytes of an `.npy` file (dtype, shape and data; no pickles).

    Args:
        array: A numpy array or anything `np.asarray` turns into one, except
            arrays of Python objects.

    Raises:
        TypeError: for an object array, which `.npy` can only hold as a pickle.

    Examples:
        >>> record = encode_array(np.arange(3, dtype=np.int16))
        >>> record[:6], decode_array(record)
        (b'\x93NUMPY', array([0, 1, 2], dtype=int16))
    """
    value = np.asarray(array)
    if value.dtype.hasobject:
        raise TypeError(
            f"Cannot store an array of Python objects (dtype {value.dtype}) as a record: "
            f"convert it to a numeric, bool or fixed-width string dtype, or serialise the "
            f"elements to bytes yourself."
        )
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=False)
    return buffer.getvalue()


def decode_array(record: bytes | bytearray | memoryview, *, copy: bool = True) -> np.ndarray:
    """The array an `encode_array` record (or any `.npy` file's bytes) holds.

    Args:
        record: The bytes of an `.npy` file, e.g. an element of an
            `ArrayRecordDataSource` written by `write_array_records` from arrays.
        copy: True (default): a new, writable array. False: a read-only view
            of `record`, without copying the data.

    Raises:
        ValueError: if `record` is not in `.npy` format or is truncated.

    Examples:
        >>> image = np.arange(6, dtype=np.uint8).reshape(2, 3)
        >>> decoded = decode_array(encode_array(image))
        >>> decoded
        array([[0, 1, 2],
               [3, 4, 5]], dtype=uint8)
        >>> decoded.flags.writeable, decode_array(encode_array(image), copy=False).flags.writeable
        (True, False)
    """
    data = memoryview(record).cast("B")
    if data[:6] != _MAGIC or len(data) < 10:
        raise ValueError(
            f"This record is not an array in .npy format (it starts with "
            f"{bytes(data[:10])!r}, not {_MAGIC!r}). Decode only records written from "
            f"numpy arrays, e.g. by write_array_records."
        )
    major = data[6]
    if major not in (1, 2):  # 3.0: a UTF-8 header, rare enough for numpy's own reader
        array: np.ndarray = np.load(io.BytesIO(bytes(data)), allow_pickle=False)
        return array
    if major == 1:
        end = 10 + int.from_bytes(data[8:10], "little")
    else:
        end = 12 + int.from_bytes(data[8:12], "little")
    dtype, shape, fortran_order = _header(bytes(data[:end]))
    count = math.prod(shape)
    if len(data) - end != count * dtype.itemsize:
        raise ValueError(
            f"This .npy record is truncated or padded: its header announces {count} "
            f"element(s) of {dtype} ({count * dtype.itemsize} bytes) but {len(data) - end} "
            f"bytes follow it."
        )
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=end)
    array = flat.reshape(shape, order="F" if fortran_order else "C")
    return array.copy(order="K") if copy else array


@functools.lru_cache(maxsize=256)
def _header(header: bytes) -> tuple[np.dtype[Any], tuple[int, ...], bool]:
    """(dtype, shape, fortran order) of an `.npy` header, parsed by numpy once per header."""
    stream = io.BytesIO(header)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    except ValueError as error:
        raise ValueError(f"This record has an invalid .npy header: {error}") from None
    if dtype.hasobject:
        raise ValueError(
            f"This .npy record holds Python objects (dtype {dtype}); it can only be read "
            f"with np.load(..., allow_pickle=True), which runs code from the file."
        )
    return dtype, tuple(shape), bool(fortran_order)
