"""Host arrays whose data starts at a multiple of 64 bytes, which XLA takes without a copy.

jax's CPU client uses a numpy array's own memory for a jitted step's
argument, or for `jax.device_put` to a CPU device, when the data is aligned
to 64 bytes; otherwise it copies the array first (on a 2-core machine about
30 microseconds of CPU for a 400 KiB batch, more than the Python around the
step). numpy aligns its allocations to 16 bytes only, so a quarter of them
happen to qualify. Rows gathered and arrays stacked here are aligned on every
call; batches are made here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ALIGNMENT = 64
"""The bytes XLA's CPU client needs a host buffer's start to be a multiple of, to alias it."""


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialized C-ordered array whose data starts at a multiple of `ALIGNMENT` bytes.

    (An array of no elements has no data: its start is whatever numpy gives.)

    Examples:
        >>> array = empty((3, 5), np.float32)
        >>> array.shape, array.dtype, array.ctypes.data % ALIGNMENT, array.flags.c_contiguous
        ((3, 5), dtype('float32'), 0, True)
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(size + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + size].view(dtype).reshape(shape)


def take_rows(array: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """`array[positions]` (positions in range), in memory from `empty`.

    Examples:
        >>> rows = take_rows(np.arange(12).reshape(4, 3), np.array([3, 0, 3]))
        >>> rows.tolist(), rows.ctypes.data % ALIGNMENT
        ([[9, 10, 11], [0, 1, 2], [9, 10, 11]], 0)
    """
    out = empty((len(positions), *array.shape[1:]), array.dtype)
    # "wrap" takes `out` as it is: "raise" (the default) would gather into a buffer and copy.
    return np.take(array, positions, axis=0, out=out, mode="wrap")


SHORT_RUN_BYTES = 64
"""Rows whose innermost contiguous run is at most this long are copied a run at a time."""

MIN_ROW_BYTES = 1024
"""Rows smaller than this are stacked by numpy alone: a Python step per row would cost more."""


def stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """`np.stack(arrays)` of arrays of one shape and dtype, into memory from `empty`.

    Examples:
        >>> image = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
        >>> stacked = stack([image, image[:, ::-1]])
        >>> np.array_equal(stacked, np.stack([image, image[:, ::-1]])), stacked.ctypes.data % 64
        (True, 0)
    """
    first = arrays[0]
    shape, dtype = first.shape, first.dtype
    if any(array.shape != shape or array.dtype != dtype for array in arrays):
        return np.stack(arrays)  # numpy's promotion, or its error
    return stack_into(empty((len(arrays), *shape), dtype), arrays)


def stack_into(out: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """`np.stack(arrays, out=out)`, faster for strided rows that end in a short contiguous run.

    numpy copies a strided array one innermost run at a time, at a cost per run:
    a horizontally flipped 64x64x3 uint8 image is 4,096 runs of 3 bytes, and
    stacking 64 of them took 35 microseconds an image on this machine. Seen as
    one item of the run's bytes (a 3-byte void) per pixel, the same copy took 9.
    Arrays of one shape and dtype; `out` C-ordered, of their stacked shape.
    """
    first = arrays[0] if len(arrays) else None
    if first is None or first.nbytes < MIN_ROW_BYTES or not out.flags.c_contiguous:
        return np.stack(arrays, out=out)
    run = first.itemsize * first.shape[-1]
    if not (0 < run <= SHORT_RUN_BYTES) or first.dtype.hasobject:
        return np.stack(arrays, out=out)
    void = np.dtype((np.void, run))
    items = out.view(void)[..., 0]
    for row, array in enumerate(arrays):
        if array.flags.c_contiguous or array.strides[-1] != array.itemsize:
            out[row] = array
        else:  # strided, its last axis contiguous: a run is one item
            items[row] = array.view(void)[..., 0]
    return out
