"""Where a record of concatenated files lives: index math from source indices to (file, position).

Files hold `counts[k]` records each; record `i` of the concatenation is in the
first file whose cumulative count exceeds `i`. Empty files hold no index.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class FileRanges(NamedTuple):
    """The source indices each of a sequence of files holds: their cumulative record counts.

    Attributes:
        starts: The source index of each file's first record.
        ends: One past the source index of each file's last record.
        ends_array: `ends` as an int64 array, for blocks of indices.
    """

    starts: list[int]
    ends: list[int]
    ends_array: np.ndarray

    @property
    def length(self) -> int:
        """The number of records of all files."""
        return self.ends[-1] if self.ends else 0


class FilePart(NamedTuple):
    """The indices of a block that fall in one file.

    Attributes:
        file: The file's number.
        slots: Where in the block those indices are; None if the whole block
            is in this file, in order.
        positions: The records' positions within the file, in block order.
    """

    file: int
    slots: list[int] | None
    positions: list[int]


def file_ranges(counts: Sequence[int]) -> FileRanges:
    """The record ranges of files holding `counts` records.

    Examples:
        >>> file_ranges([3, 0, 2]).ends
        [3, 3, 5]
    """
    ends = list(itertools.accumulate(counts))
    starts = [end - count for end, count in zip(ends, counts)]
    return FileRanges(starts, ends, np.asarray(ends, dtype=np.int64))


def check_index(index: Any, length: int, owner: str) -> int:
    """`index` as an int after checking `0 <= index < length`; `owner` names the source in errors.

    Examples:
        >>> check_index(5, 3, "source")
        Traceback (most recent call last):
        ...
        IndexError: index 5 is out of range for source, which has 3 records: ...
    """
    if isinstance(index, bool):
        raise TypeError(f"index must be an integer, got {index!r}.")
    try:
        key = operator.index(index)
    except TypeError:
        raise TypeError(
            f"index must be an integer, got {index!r} of type {type(index).__name__}."
        ) from None
    if not 0 <= key < length:
        raise IndexError(
            f"index {key} is out of range for {owner}, which has {length} records: valid "
            f"indices are 0 <= index < {length}."
        )
    return key


def locate(where: FileRanges, index: int) -> tuple[int, int]:
    """(file, position in the file) of record `index`, for `0 <= index < length`.

    Examples:
        >>> locate(file_ranges([3, 0, 2]), 3)
        (2, 0)
    """
    file = bisect.bisect_right(where.ends, index) if len(where.ends) > 1 else 0
    return file, index - where.starts[file]


def split_by_file(where: FileRanges, keys: list[int]) -> list[FilePart]:
    """The indices `keys` (all in range) grouped by file, files in order.

    Examples:
        >>> for part in split_by_file(file_ranges([3, 0, 2]), [4, 0, 3, 2]):
        ...     print(part)
        FilePart(file=0, slots=[1, 3], positions=[0, 2])
        FilePart(file=2, slots=[0, 2], positions=[1, 0])
        >>> split_by_file(file_ranges([3, 0, 2]), [1, 0])
        [FilePart(file=0, slots=None, positions=[1, 0])]
    """
    if len(where.ends) == 1:
        return [FilePart(0, None, keys)]
    array = np.asarray(keys, dtype=np.int64)
    files = np.searchsorted(where.ends_array, array, side="right")
    first = int(files[0])
    if (files == first).all():
        return [FilePart(first, None, (array - where.starts[first]).tolist())]
    order = np.argsort(files, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(files[order])) + 1)
    parts = []
    for group in groups:
        file = int(files[group[0]])
        parts.append(FilePart(file, group.tolist(), (array[group] - where.starts[file]).tolist()))
    return parts
