"""The arrays of a packed block, and the order its rows come out in.

A packed feature of length `T` over `R` rows is `R * T` cells tiled, row by
row, by pieces: for each element of the row, the padding up to its (aligned)
start and then the element, and after the last one the padding to the row's
end. `tile_rows` works the pieces out for every feature at once with numpy;
`fill` writes one feature's values, positions and segment ids, each with one
`np.concatenate` (or `np.repeat`), so every cell is written once and the
per-element Python work is a list comprehension. The three arrays share one
buffer, which `Memory` reuses once the block's rows are gone.
"""

from __future__ import annotations

import collections
import functools
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from grainfn._src.packing.spec import PackSpec


class Pieces(NamedTuple):
    """The pieces that tile a block's rows, for every feature.

    Attributes:
        elements: `(P,)` the element each piece holds (by sorted position), -1 for padding.
        sizes: `(P, F)` each piece's size per feature (0 where a feature has none).
        segments: `(P,)` each piece's segment id, 0 for padding.
    """

    elements: np.ndarray
    sizes: np.ndarray
    segments: np.ndarray


def tile_rows(
    rows: np.ndarray, sizes: np.ndarray, lengths: Sequence[int], alignments: Sequence[int]
) -> Pieces:
    """The pieces of a block whose elements, sorted by row, are in `rows` with `sizes`.

    Row `r` is pieces `[pad, element]` for each of its elements, then `[pad]`.
    An element starts where the previous one in its row started plus its size
    rounded up to the feature's alignment (so starts stay aligned).

    Args:
        rows: `(K,)` each element's row, ascending, rows `0 .. R - 1` all used.
        sizes: `(K, F)` each element's length per feature.
        lengths: Per feature, the packed length `T`.
        alignments: Per feature, the alignment.

    Examples:
        >>> pieces = tile_rows(np.array([0, 0, 1]), np.array([[3], [2], [4]]), [6], [2])
        >>> pieces.elements.tolist(), pieces.sizes[:, 0].tolist(), pieces.segments.tolist()
        ([-1, 0, -1, 1, -1, -1, 2, -1], [0, 3, 1, 2, 0, 0, 4, 2], [0, 1, 0, 2, 0, 0, 1, 0])
    """
    count, num_rows = len(rows), int(rows[-1]) + 1
    aligned = np.asarray(alignments)
    steps = sizes if (aligned == 1).all() else -(-sizes // aligned) * aligned
    offsets = np.cumsum(steps, axis=0) - steps  # each element's start in the whole block
    first = np.searchsorted(rows, rows)  # each element's row's first element
    starts = offsets - offsets[first]
    ends = starts + sizes
    previous = np.zeros_like(ends)
    previous[1:] = ends[:-1]
    leading = first == np.arange(count)
    previous[leading] = 0  # a row's first element follows nothing
    last = np.flatnonzero(np.append(rows[1:] != rows[:-1], True))  # each row's last element
    slots = 2 * np.arange(count) + rows  # element k's padding piece; k's own piece is next
    total = 2 * count + num_rows
    index = np.full(total, -1, np.int64)
    index[slots + 1] = np.arange(count)
    piece_sizes = np.zeros((total, sizes.shape[1]), np.int64)
    piece_sizes[slots] = starts - previous
    piece_sizes[slots + 1] = sizes
    piece_sizes[2 * last + np.arange(num_rows) + 2] = np.asarray(lengths) - ends[last]
    segments = np.zeros(total, np.int32)
    segments[slots + 1] = np.arange(1, count + 1) - first
    return Pieces(index, piece_sizes, segments)


def fill(
    values: Sequence[np.ndarray],
    pieces: Pieces,
    feature: int,
    num_rows: int,
    length: int,
    padding: Any = None,
    name: str = "feature",
    memory: Memory | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One feature's packed values, segment ids and positions.

    Args:
        values: The elements' values (sorted by row), each with a leading length axis.
        pieces: The block's pieces, from `tile_rows`.
        feature: Which column of `pieces.sizes` is this feature's.
        num_rows: The number of rows `R`.
        length: The feature's packed length `T`.
        padding: The padding value, or None for zeros.
        name: The feature's name, for errors.
        memory: Where the three arrays' buffer comes from; None: a new allocation.

    Returns:
        `(values, segment_ids, positions)`, of shapes `(R, T, ...)`, `(R, T)` and
        `(R, T)`; the values have the dtype of the block's first element.

    Examples:
        >>> sizes = np.array([[3], [2], [4]])
        >>> pieces = tile_rows(np.array([0, 0, 1]), sizes, [6], [2])
        >>> values, segments, positions = fill(
        ...     [np.arange(3), np.arange(2), np.arange(4)], pieces, 0, 2, 6, padding=-1)
        >>> values
        array([[ 0,  1,  2, -1,  0,  1],
               [ 0,  1,  2,  3, -1, -1]])
        >>> segments
        array([[1, 1, 1, 0, 2, 2],
               [1, 1, 1, 1, 0, 0]], dtype=int32)
        >>> positions
        array([[0, 1, 2, 0, 0, 1],
               [0, 1, 2, 3, 0, 0]], dtype=int32)
    """
    first = values[0]
    dtype, inner = first.dtype, first.shape[1:]
    keep = pieces.sizes[:, feature] > 0
    sizes_array = pieces.sizes[keep, feature]
    index, sizes = pieces.elements[keep].tolist(), sizes_array.tolist()
    if padding is None:
        pad = np.zeros((length, *inner), dtype)
    else:
        pad = np.full((length, *inner), padding, dtype)
    packed, segment_ids, positions = _outputs(num_rows, length, inner, dtype, memory)
    cells = num_rows * length
    try:
        np.concatenate(
            [values[k] if k >= 0 else pad[:size] for k, size in zip(index, sizes)],
            out=packed.reshape(cells, *inner),
            casting="unsafe",
        )
    except ValueError as error:
        shapes = sorted({value.shape[1:] for value in values} - {inner})
        raise ValueError(
            f"Feature {name!r} has elements of different inner shapes in one block: the first "
            f"has shape (n, *{inner}), another (n, *{shapes[0] if shapes else '?'}). Packing "
            "joins elements along their first axis only, so the other axes must agree."
        ) from error
    counting, zeros = _prefixes(length)
    np.concatenate(
        [counting[size] if k >= 0 else zeros[size] for k, size in zip(index, sizes)],
        out=positions.reshape(cells),
    )
    segment_ids.reshape(cells)[:] = np.repeat(pieces.segments[keep], sizes_array)
    return packed, segment_ids, positions


def _outputs(
    num_rows: int,
    length: int,
    inner: tuple[int, ...],
    dtype: np.dtype[Any],
    memory: Memory | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty values, segment ids and positions arrays for one feature, from one buffer."""
    cells = num_rows * length
    if dtype.hasobject or memory is None:
        values = np.empty((num_rows, length, *inner), dtype)
        return (
            values,
            np.empty((num_rows, length), np.int32),
            np.empty((num_rows, length), np.int32),
        )
    start = -(-8 * cells // 64) * 64  # the values start 64-byte aligned, after two int32 arrays
    buffer = memory.take(start + cells * int(np.prod(inner, dtype=np.int64)) * dtype.itemsize)
    segment_ids = buffer[: 4 * cells].view(np.int32).reshape(num_rows, length)
    positions = buffer[4 * cells : 8 * cells].view(np.int32).reshape(num_rows, length)
    values = buffer[start:].view(dtype).reshape(num_rows, length, *inner)
    return values, segment_ids, positions


class Memory:
    """Buffers for one feature's packed arrays, each reused once no array made from it is left.

    A packing stage writes every block into new arrays, and the rows it yields
    are views of them. Fresh memory costs page faults on first write, often
    more than the packing itself, so a stage keeps the buffers of consumed
    blocks for the next ones. A buffer is handed out as a uint8 array over a
    pooled bytearray; numpy makes every array derived from it (rows, slices,
    views of views, memoryviews) refer to that array, so it dies exactly when
    the last of them does, and a finalizer then returns the bytearray to the
    pool. A row the consumer keeps therefore keeps its buffer out of the pool:
    nothing is overwritten while it can be seen. The pool only appends and pops,
    so a finalizer may run in any thread.

    Examples:
        >>> memory = Memory()
        >>> first = memory.take(16)
        >>> row = first[:8]
        >>> del first
        >>> second = memory.take(16)  # `row` still uses the first buffer
        >>> np.shares_memory(row, second)
        False
    """

    def __init__(self, keep: int = 2) -> None:
        self.free: collections.deque[bytearray] = collections.deque(maxlen=keep)

    def take(self, size: int) -> np.ndarray:
        """A writable uint8 array of `size` bytes that no live array shares."""
        try:
            raw = self.free.pop()
        except IndexError:
            raw = bytearray(size)
        if len(raw) != size:  # a smaller last block, or another dtype: not worth keeping
            raw = bytearray(size)
        buffer = np.frombuffer(raw, np.uint8)
        weakref.finalize(buffer, self.free.append, raw).atexit = False
        return buffer


@functools.lru_cache(maxsize=8)
def _prefixes(length: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """`arange(length)[:n]` and `zeros(length)[:n]` (int32) for every n: pieces of positions."""
    counting = np.arange(length, dtype=np.int32)
    zeros = np.zeros(length, np.int32)
    return tuple(counting[:n] for n in range(length + 1)), tuple(
        zeros[:n] for n in range(length + 1)
    )


def row_order(spec: PackSpec, packed: Mapping[str, Any], num_rows: int, emitted: int) -> list[int]:
    """The order in which a block's rows come out.

    Unshuffled, rows come in bin order. Shuffled, the j-th row out is `p[j]` for
    `p = np.random.default_rng(seed + emitted).permuted(range(num_rows))`, where
    `emitted` counts the rows yielded before the block. With a group-by
    feature, rows are sorted by `distinct_mean` of that feature's row first,
    then by `p`.

    Examples:
        >>> from grainfn._src.packing.spec import pack_spec
        >>> row_order(pack_spec("first_fit", {"x": 4}, 3, shuffle_bins=False), {}, 3, 0)
        [0, 1, 2]
        >>> sorted(row_order(pack_spec("first_fit", {"x": 4}, 3), {}, 3, 0))
        [0, 1, 2]
    """
    if not spec.shuffle_bins or num_rows == 1:
        return list(range(num_rows))
    permutation = np.random.default_rng(spec.seed + emitted).permuted(np.arange(num_rows))
    if spec.group_by is None:
        return permutation.tolist()
    means = [distinct_mean(row) for row in packed[spec.group_by]]
    ranks = permutation.tolist()
    return sorted(range(num_rows), key=lambda i: (means[i], ranks[i]))


def distinct_mean(row: Any) -> float:
    """The sum of a row's distinct values over how many of them are nonzero; 0.0 if none.

    Examples:
        >>> distinct_mean(np.array([3, 3, 1, 0, 0]))
        2.0
        >>> distinct_mean(np.zeros(4))
        0.0
    """
    distinct = np.unique(row)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nan_to_num(np.sum(distinct) / np.count_nonzero(distinct), nan=0.0))
