"""Batches padded to a fixed size: a `batch_fn` that keeps every batch the same shape.

A short batch (the last one of an epoch, when the remainder is kept) is
stacked as usual and then filled up to `batch_size` with `pad_value`, so a
jitted step sees one shape only. The padding follows Grain's
`batch_and_pad`: each padding leaf takes the shape and dtype of the first
value's leaf, and the stacked leaf the dtype numpy gives the values and the
padding together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from grainfn._src import tree, validate

T = TypeVar("T")


def batch_and_pad(values: Sequence[T], *, batch_size: int, pad_value: Any = 0) -> T:
    """Stacks `values` leaf by leaf and pads the batch up to `batch_size` elements.

    Pass it to `batch` as `batch_fn`, with the same `batch_size`, to keep the
    last short batch at full size instead of dropping it.

    Args:
        values: One to `batch_size` elements of the same structure (dicts,
            lists, tuples and namedtuples of leaves) whose leaves have equal shapes.
        batch_size: The size of the batch returned.
        pad_value: The value the missing elements' leaves are filled with, cast
            to the dtype of the first value's leaf.

    Returns:
        A pytree of the values' structure whose leaves are numpy arrays with a
        leading axis of size `batch_size`: the stacked values, then padding.

    Raises:
        ValueError: if `values` is empty or longer than `batch_size`, if the
            values differ in structure or in a leaf's shape, or if `pad_value`
            does not fit a leaf's dtype.

    Examples:
        >>> batch_and_pad([1, 2], batch_size=4)
        array([1, 2, 0, 0])
        >>> batch_and_pad([{"x": 1.5, "y": (1, 2)}], batch_size=2, pad_value=-1)
        {'x': array([ 1.5, -1. ]), 'y': (array([ 1, -1]), array([ 2, -1]))}
        >>> import functools
        >>> import grainfn as grain
        >>> pad = functools.partial(batch_and_pad, batch_size=3)
        >>> [b.tolist() for b in grain.MapDataset.range(1, 5).batch(3, batch_fn=pad)]
        [[1, 2, 3], [4, 0, 0]]
        >>> batch_and_pad([1, 2, 3], batch_size=2)
        Traceback (most recent call last):
        ...
        ValueError: batch_and_pad got 3 values for a batch of batch_size=2; ...
    """
    batch_size = validate.check_positive_int(batch_size, "batch_size", validate.INT64_MAX)
    count = len(values)
    if count == 0:
        raise ValueError("batch_and_pad needs at least one value to batch, got none.")
    if count > batch_size:
        raise ValueError(
            f"batch_and_pad got {count} values for a batch of batch_size={batch_size}; pass "
            "the same batch_size to batch and to batch_and_pad."
        )
    if count == batch_size:
        return tree.stack(values)
    padding = pad_like(values[0], pad_value)
    return tree.stack([*values, *[padding] * (batch_size - count)])


def pad_like(element: Any, pad_value: Any) -> Any:
    """An element of `element`'s structure, each leaf `pad_value` in that leaf's shape and dtype.

    Examples:
        >>> pad_like({"a": np.ones((2,), np.float32), "b": [7, "xy"], "c": None}, 5)
        {'a': array([5., 5.], dtype=float32), 'b': [array(5), array('5', dtype='<U2')], 'c': None}
    """

    def pad(leaf: Any) -> Any:
        if leaf is None:  # an empty subtree stays empty
            return None
        array = np.asarray(leaf)
        try:
            return np.full(array.shape, pad_value, dtype=array.dtype)
        except (OverflowError, TypeError, ValueError) as error:
            raise ValueError(
                f"pad_value={pad_value!r} does not fit a leaf of dtype {array.dtype} ({error}); "
                "pass a pad_value every leaf's dtype can hold."
            ) from None

    return tree.map_leaves(pad, element)
