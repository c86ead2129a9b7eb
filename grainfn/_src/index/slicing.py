"""Index math of slice, repeat and epochs.

A dataset of length `n` answers every index `i >= 0`: `i // n` is the epoch and
`i % n` the position in it. The functions here map output indices to parent
indices. They accept Python ints, numpy int arrays and jax arrays alike.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from grainfn._src.index.backend import namespace


def slice_params(sl: slice, parent_length: int) -> tuple[int, int, int]:
    """Returns `(start, step, length)` of `sl` applied to `parent_length` items.

    Python's own slice semantics, negative steps included.

    Examples:
        >>> slice_params(slice(1, None, 2), 6)
        (1, 2, 3)
        >>> slice_params(slice(None, None, -1), 4)
        (3, -1, 4)
    """
    start, stop, step = sl.indices(parent_length)
    return start, step, len(range(start, stop, step))


def contiguous_part(length: int, part: int, parts: int, drop_remainder: bool = False) -> range:
    """The positions of part `part` of `parts` contiguous, nearly equal parts of `length`.

    The first `length % parts` parts hold one position more, unless
    `drop_remainder`, where every part holds `length // parts` and the rest is left out.

    Examples:
        >>> [contiguous_part(10, i, 3) for i in range(3)]
        [range(0, 4), range(4, 7), range(7, 10)]
        >>> contiguous_part(10, 2, 3, drop_remainder=True)
        range(6, 9)
    """
    per_part, remainder = divmod(length, parts)
    start, stop = per_part * part, per_part * (part + 1)
    if not drop_remainder:
        start += min(part, remainder)
        stop += min(part + 1, remainder)
    return range(start, stop)


def slice_indices(indices: Any, start: int, step: int, length: int, parent_length: int) -> Any:
    """Maps indices of a slice to indices of its parent, epoch by epoch.

    Epoch `e` of the slice reads epoch `e` of the parent.

    Examples:
        >>> start, step, length = slice_params(slice(1, None, 2), 6)
        >>> [slice_indices(i, start, step, length, 6) for i in range(5)]
        [1, 3, 5, 7, 9]
    """
    epoch, offset = indices // length, indices % length
    return start + offset * step + epoch * parent_length


def take_indices(indices: Any, table: Any, parent_length: int) -> Any:
    """Maps indices of a selection given by `table` to indices of its parent.

    `table[j]` is the parent index of position `j`; epoch `e` of the selection
    reads epoch `e` of the parent.

    Examples:
        >>> table = np.array([4, 0, 2])
        >>> take_indices(np.arange(6), table, 5).tolist()
        [4, 0, 2, 9, 5, 7]
    """
    xp = namespace(indices)
    length = len(table)
    epoch, offset = indices // length, indices % length
    return xp.asarray(table)[offset] + epoch * parent_length


def index_table(positions: Sequence[Any], parent_length: int) -> np.ndarray:
    """Checks a sequence of parent positions and returns it as an int64 array.

    Negative positions count from the end, as in Python.

    Examples:
        >>> index_table([0, -1, 2], 4).tolist()
        [0, 3, 2]
    """
    table = []
    for position in positions:
        try:
            p = operator.index(position)
        except TypeError:
            raise TypeError(
                f"slice positions must be integers, got {position!r} of type "
                f"{type(position).__name__}."
            ) from None
        if not -parent_length <= p < parent_length:
            raise IndexError(
                f"slice position {p} is out of range for a dataset of length {parent_length}; "
                f"allowed: {-parent_length} <= position < {parent_length}."
            )
        table.append(p % parent_length)
    return np.asarray(table, dtype=np.int64)


def repeat_indices(indices: Any, parent_length: int, reseed_each_epoch: bool) -> Any:
    """Maps indices of a repeated dataset to its parent.

    With `reseed_each_epoch` the index passes through, so each repetition is a
    new epoch of the parent (new shuffle, new random draws); without it every
    repetition reads the parent's first epoch.

    Examples:
        >>> repeat_indices(7, 5, True), repeat_indices(7, 5, False)
        (7, 2)
    """
    return indices if reseed_each_epoch else indices % parent_length


MAX_POSITION = 2**63 - 1
"""The last position the host addresses: past it the host raises, so no bound goes beyond."""


def check_addressable(max_index: int, length: int, parent_length: int) -> None:
    """Raises OverflowError if epoch math on `max_index` would leave int64.

    Index `i` of a stage of `length` positions reads epoch `i // length` of a
    parent with `parent_length` positions; parent positions must stay below
    2**63 so that they fit the int64 arrays the block path uses.

    Examples:
        >>> check_addressable(10, 5, 7)
        >>> check_addressable(5, 5, 2**63 - 1)
        Traceback (most recent call last):
        ...
        OverflowError: position 5 reads epoch 1 of a parent of length 9223372036854775807, ...
    """
    epoch = max_index // length
    if epoch and (epoch + 1) * parent_length > MAX_POSITION + 1:
        raise OverflowError(
            f"position {max_index} reads epoch {epoch} of a parent of length {parent_length}, "
            "past the last addressable position 2**63 - 1."
        )
