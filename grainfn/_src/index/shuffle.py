"""Grain-compatible global shuffle: a keyed bijection of [0, n), computed per index.

The order is the one of Grain 0.2.18's `MapDataset.shuffle`: a Simon-like Feistel
cipher over a power-of-two block of B bits, cycle-walked into [0, n), keyed by
`std::seed_seq{seed}` with one seed per epoch. Memory is O(1) per index.

Grain sizes the block with `ceil(log2(n - 1))` in floating point. That is one bit
short when `n - 1` is exactly 2**k for even k >= 16 (n = 65537, 2**18 + 1, ...),
or lies just above such a power with k >= 50 (the double log2 rounds down onto
k), and Grain's result is then not a permutation. Here B comes from the exact bit
length, so the order equals Grain's for every other length and is a true
permutation for all lengths in [1, 2**63).

`permute_index` is Grain's `index_shuffle` with any even number of rounds in
[4, 1024] (the key words are `seed_seq.generate` of that many words); only
4 rounds, the shuffle's, have the vectorized numpy and jax paths.

The cipher itself is `grainfn._src.index.cipher`; the jax path is
`grainfn._src.index.shuffle_jax`, imported only for jax input.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, TypeVar, cast

import numpy as np

from grainfn._src.index.cipher import (
    M32,
    ROUNDS,
    SEED_SEQ_INIT,
    TABLE_BITS,
    array_keys,
    block_bits,
    encrypt,
    int_keys,
    key_dtype,
    walk_int,
)
from grainfn._src.index.seeds import SEED_LIMIT

_Array = TypeVar("_Array")

_MAX_ROUNDS = 1024
_MAX_LENGTH = 2**63 - 1
_CHUNK = 1 << 16  # numpy temporaries of this many elements stay in cache
_PYTHON_MAX = 16  # up to this many values are cheaper to encrypt with Python ints


def shuffle_indices(indices: _Array, length: int, seed: int) -> _Array:
    """Maps dataset positions to parent indices of a shuffled dataset of `length`.

    Position `i` lies in epoch `e, j = divmod(i, length)` and maps to
    `permutation_e(j) + e * length`, where epoch `e` uses seed `(seed + e) % 2**32`,
    exactly as Grain's `MapDataset.shuffle` does.

    Args:
        indices: Integer positions >= 0: a numpy array (or array-like), or a jax
            array, possibly traced under `jax.jit`. Without `jax_enable_x64`, jax
            supports lengths up to 2**32 (2**31 for int32 indices).
        length: Length of the dataset being shuffled, in [1, 2**63 - 1].
        seed: Shuffle seed in [0, 2**32).

    Returns:
        Parent indices with the shape of `indices`: numpy int64 for numpy input, a
        jax array of the input dtype for jax input.

    Raises:
        ValueError: If `length`, `seed` or a (concrete) index is out of range, or
            if an index's epoch may shuffle past the int64 range.
        TypeError: If `indices` are not integers.

    Examples:
        >>> shuffle_indices(np.arange(10), 5, seed=42)
        array([4, 1, 2, 3, 0, 7, 5, 8, 6, 9])
        >>> sorted(shuffle_indices(np.arange(1000), 1000, seed=7)) == list(range(1000))
        True
    """
    length, seed = _check_length(length), _check_seed(seed)
    if type(indices).__module__.startswith("jax"):
        from grainfn._src.index.shuffle_jax import shuffle_jax  # jax loads only when used

        return cast(_Array, shuffle_jax(indices, length, seed))
    array = np.asarray(indices)
    if array.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got dtype {array.dtype}.")
    flat = array.astype(np.int64, copy=False).reshape(-1)
    if 0 < flat.size <= _CHUNK:
        return cast(_Array, _shuffle_chunk(flat, length, seed).reshape(array.shape))
    out = np.empty_like(flat)
    for start in range(0, flat.size, _CHUNK):
        out[start : start + _CHUNK] = _shuffle_chunk(flat[start : start + _CHUNK], length, seed)
    return cast(_Array, out.reshape(array.shape))


def shuffle_index(index: int, length: int, seed: int) -> int:
    """Scalar `shuffle_indices` on Python ints: one random access, no array overhead.

    Args:
        index: Position >= 0 (any epoch).
        length: Length of the dataset being shuffled, in [1, 2**63 - 1].
        seed: Shuffle seed in [0, 2**32).

    Returns:
        The parent index, equal to `shuffle_indices(np.array([index]), length, seed)[0]`.

    Raises:
        ValueError: If `index`, `length` or `seed` is out of range.

    Examples:
        >>> [shuffle_index(i, 5, seed=42) for i in range(10)]
        [4, 1, 2, 3, 0, 7, 5, 8, 6, 9]
        >>> shuffle_index(123_456_789, 2**40, seed=0)
        939530984160
    """
    length, seed = _check_length(length), _check_seed(seed)
    index = _check_int(index, "index", "an integer >= 0", 0, None)
    epoch, position = divmod(index, length)
    return _permute_int(position, length, (seed + epoch) & M32) + epoch * length


def permute_index(index: int, max_index: int, seed: int, rounds: int = ROUNDS) -> int:
    """The image of `index` under the keyed permutation of `[0, max_index]` with `rounds` rounds.

    This is Grain's `index_shuffle(index, max_index, seed, rounds)`: with
    `rounds=4` it is one epoch of `MapDataset.shuffle` (`shuffle_index(index,
    max_index + 1, seed)`); more rounds give another permutation of the same
    range, equal to Grain's for every length where Grain's is a permutation
    (see the module docstring). Other round counts run on Python ints (the
    smallest blocks through a cached table), not through the vectorized paths.

    Args:
        index: A position in `[0, max_index]`.
        max_index: The largest position, in `[0, 2**63 - 1]`.
        seed: The permutation's key, in `[0, 2**32)`.
        rounds: Feistel rounds, an even integer between 4 and 1024.

    Returns:
        The permuted position, in `[0, max_index]`.

    Raises:
        ValueError: If `index`, `max_index`, `seed` or `rounds` is out of range.
        TypeError: If one of them is not an integer.

    Examples:
        >>> [permute_index(i, max_index=4, seed=42) for i in range(5)]
        [4, 1, 2, 3, 0]
        >>> sorted(permute_index(i, max_index=9, seed=3, rounds=10) for i in range(10))
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        >>> permute_index(0, max_index=8, seed=0, rounds=5)
        Traceback (most recent call last):
        ...
        ValueError: rounds must be an even integer between 4 and 1024, got rounds=5.
    """
    max_index = _check_int(max_index, "max_index", "an integer in [0, 2**63 - 1]", 0, _MAX_LENGTH)
    index = _as_int(index, "index", "an integer in [0, max_index]")
    if not 0 <= index <= max_index:
        raise ValueError(
            f"index must be in [0, max_index], got index={index} with max_index={max_index}."
        )
    seed = _check_seed(seed)
    rounds = _as_int(rounds, "rounds", "an even integer between 4 and 1024")
    if rounds % 2 or not ROUNDS <= rounds <= _MAX_ROUNDS:
        raise ValueError(f"rounds must be an even integer between 4 and 1024, got rounds={rounds}.")
    return _permute_int(index, max_index + 1, seed, rounds)


def _as_int(value: Any, name: str, allowed: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be {allowed}, got {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {allowed}, got {value!r}.") from None


def _check_int(value: Any, name: str, allowed: str, low: int, high: int | None) -> int:
    if isinstance(value, bool):  # inlined `_as_int`: shuffle_index checks three ints per call
        raise TypeError(f"{name} must be {allowed}, got {value!r}.")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {allowed}, got {value!r}.") from None
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {allowed}, got {value}.")
    return cast(int, value)


def _check_length(length: Any) -> int:
    return _check_int(length, "length", "an integer in [1, 2**63 - 1]", 1, _MAX_LENGTH)


def _check_seed(seed: Any) -> int:
    return _check_int(seed, "seed", "an integer in [0, 2**32)", 0, SEED_LIMIT - 1)


def _permute_int(position: int, length: int, seed: int, rounds: int = ROUNDS) -> int:
    max_index = length - 1
    if max_index == 0:
        return 0
    bits = block_bits(max_index)
    if bits == TABLE_BITS:
        return int(_table(length, seed, rounds)[position])
    return walk_int(position, max_index, bits // 2, int_keys(seed, bits // 2, rounds))


@functools.lru_cache(maxsize=32)
def _table(length: int, seed: int, rounds: int) -> np.ndarray:
    """The cycle-walked permutation of [0, length) for a 16-bit block, as uint16."""
    keys = [np.uint16(k) for k in int_keys(seed, TABLE_BITS // 2, rounds)]
    block = np.arange(1 << TABLE_BITS, dtype=np.uint32)
    succ = encrypt(block, TABLE_BITS // 2, keys).astype(np.intp)
    # Pointer doubling: after r rounds succ[x] is the first in-range value among the
    # first 2**r cipher steps from x (else the 2**r-th); cycles have <= 2**16 steps.
    while (succ[:length] >= length).any():
        succ = np.where(succ >= length, np.take(succ, succ), succ)
    table = succ[:length].astype(np.uint16)
    table.flags.writeable = False
    return table


def _permute_numpy(position: np.ndarray, length: int, seeds: int | np.ndarray) -> np.ndarray:
    """Permutes int64 positions in [0, length) with one seed or a uint32 seed per element."""
    max_index = length - 1
    bits = block_bits(max_index)
    if max_index == 0:
        return np.zeros(position.shape, np.uint16)
    if bits == TABLE_BITS:
        if isinstance(seeds, int):
            return _table(length, seeds, ROUNDS)[position]
        out = np.empty(position.shape, np.uint16)
        for seed in np.unique(seeds):
            selected = seeds == seed
            out[selected] = _table(length, int(seed), ROUNDS)[position[selected]]
        return out
    w = bits // 2
    if position.size <= _PYTHON_MAX:
        seed_list = [seeds] * position.size if isinstance(seeds, int) else seeds.tolist()
        pairs = zip(position.tolist(), seed_list, strict=True)
        return np.array(
            [walk_int(p, max_index, w, int_keys(s, w, ROUNDS)) for p, s in pairs], np.uint64
        )
    half = key_dtype(w)
    if isinstance(seeds, int):
        keys: list[Any] = [half(k) for k in int_keys(seeds, w, ROUNDS)]
    else:
        keys = array_keys(seeds, np.full(seeds.shape, SEED_SEQ_INIT, np.uint32), w)
        keys = [k.astype(half) for k in keys]
    value = encrypt(position.astype(np.uint32 if bits <= 32 else np.uint64), w, keys)
    active = np.flatnonzero(value > max_index)
    while active.size > _PYTHON_MAX:  # cycle walking: re-encrypt only values out of range
        walk_keys = keys if isinstance(seeds, int) else [k[active] for k in keys]
        walked = encrypt(value[active], w, walk_keys)
        value[active] = walked
        active = active[walked > max_index]
    for i in active.tolist():  # the last few stragglers are cheaper one by one
        seed = seeds if isinstance(seeds, int) else int(seeds[i])
        value[i] = walk_int(int(value[i]), max_index, w, int_keys(seed, w, ROUNDS))
    return value


def _shuffle_chunk(indices: np.ndarray, length: int, seed: int) -> np.ndarray:
    low, high = int(indices.min()), int(indices.max())
    if low < 0:
        raise ValueError(f"indices must be >= 0, got {low}.")
    first_epoch, last_epoch = low // length, high // length
    if (last_epoch + 1) * length - 1 > _MAX_LENGTH:
        raise ValueError(f"index {high} shuffles to a position that may not fit in int64.")
    if first_epoch == last_epoch:
        base = first_epoch * length
        positions = indices - base if base else indices
        out = _permute_numpy(positions, length, (seed + first_epoch) % SEED_LIMIT)
        out = out.astype(np.int64, copy=False)
        if base:
            out += base
        return out
    epoch = indices // length
    seeds = (epoch % SEED_LIMIT).astype(np.uint32) + np.uint32(seed)
    out = _permute_numpy(indices - epoch * length, length, seeds)
    return out.astype(np.int64) + epoch * length
