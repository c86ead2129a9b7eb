"""The shuffle's cipher: a Simon-like Feistel cipher keyed by `std::seed_seq`, as in Grain.

Grain 0.2.18's `index_shuffle` encrypts a value of a power-of-two block of
`2 * w` bits in Feistel rounds over two `w`-bit halves, with Simon's round
function and one key word per half-round from `std::seed_seq{seed}`. These are
its pieces, on Python ints (`int_keys`, `encrypt_int`, `walk_int`) and on
numpy or jax unsigned arrays (`array_keys`, `encrypt`); `grainfn._src.index.shuffle`
cycle-walks them into `[0, n)` on numpy, `grainfn._src.index.shuffle_jax` on jax.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ROUNDS = 4
"""`MapDataset.shuffle`'s rounds; Grain's `index_shuffle` takes any even number in [4, 1024]."""

M32 = 0xFFFFFFFF
"""The mask of a 32-bit word: `std::seed_seq` computes modulo 2**32."""

SEED_SEQ_INIT = 0x8B8B8B8B
"""The value `std::seed_seq.generate` fills its output with before mixing."""

TABLE_BITS = 16
"""The smallest block, in bits: Grain never encrypts fewer."""

TABLE_ROUND_BITS = 16
"""Half-blocks up to this many bits look the round function up in a table (numpy only)."""


def block_bits(max_index: int) -> int:
    """The bits of the block that holds `[0, max_index]`: even, at least `TABLE_BITS`.

    Sized from the exact bit length (Grain's float `log2` is one bit short for
    a few lengths, where its shuffle is not a permutation).

    Examples:
        >>> block_bits(9), block_bits(2**16), block_bits(2**40 - 1)
        (16, 18, 40)
    """
    bits = max_index.bit_length()
    return max(TABLE_BITS, bits + (bits & 1))


def generate_keys(
    seeds: Any, init: Any, wrap: Callable[[Any], Any], rounds: int = ROUNDS
) -> list[Any]:
    """`std::seed_seq{seed}.generate()` of `rounds` words ([rand.util.seedseq]).

    Elementwise over Python ints (`wrap` reduces mod 2**32) or over numpy / jax
    uint32 arrays (which wrap by themselves; `init` then has the seeds' shape).

    Examples:
        >>> generate_keys(0, SEED_SEQ_INIT, lambda x: x & M32) == list(int_keys(0, 32, 4))
        True
    """
    n, s = rounds, 1  # n output words from s = 1 input word
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p, m = (n - t) // 2, max(s + 1, n)
    q = p + t
    b = [init] * n
    for k in range(m):
        x = b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n]
        r1 = wrap(1664525 * (x ^ (x >> 27)))
        r2 = wrap(r1 + (s if k == 0 else k % n + seeds if k <= s else k % n))
        b[(k + p) % n] = wrap(b[(k + p) % n] + r1)
        b[(k + q) % n] = wrap(b[(k + q) % n] + r2)
        b[k % n] = r2
    for k in range(m, m + n):
        x = wrap(b[k % n] + b[(k + p) % n] + b[(k - 1) % n])
        r3 = wrap(1566083941 * (x ^ (x >> 27)))
        r4 = wrap(r3 - k % n)
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return b


@functools.lru_cache(maxsize=1024)
def int_keys(seed: int, word_bits: int, rounds: int) -> tuple[int, ...]:
    """The `rounds` key words of `seed` for halves of `word_bits` bits, as Python ints.

    Examples:
        >>> len(int_keys(7, 8, 4)), all(k < 2**8 for k in int_keys(7, 8, 4))
        (4, True)
    """
    mask = (1 << word_bits) - 1
    keys = generate_keys(seed, SEED_SEQ_INIT, lambda x: x & M32, rounds)
    return tuple(k & mask for k in keys)


def array_keys(seeds: Any, init: Any, w: int) -> list[Any]:
    """The `ROUNDS` key words of a numpy or jax uint32 array of seeds, masked to `w` bits.

    `init` is `SEED_SEQ_INIT` in the seeds' shape.

    Examples:
        >>> seeds = np.array([7, 8], np.uint32)
        >>> keys = array_keys(seeds, np.full(2, SEED_SEQ_INIT, np.uint32), 8)
        >>> [int(k[0]) for k in keys] == list(int_keys(7, 8, ROUNDS))
        True
    """
    mask = np.uint32((1 << w) - 1)
    return [k & mask for k in generate_keys(seeds, init, lambda x: x)]


def encrypt_int(value: int, w: int, keys: tuple[int, ...]) -> int:
    """Encrypts a `2 * w`-bit Python int with `keys` (two a round).

    Examples:
        >>> encrypt_int(5, 8, int_keys(42, 8, ROUNDS)) < 2**16
        True
    """
    mask, s1, s2, s8 = (1 << w) - 1, w - 1, w - 2, w - 8
    left, right = value >> w, value & mask
    for key1, key2 in zip(keys[::2], keys[1::2], strict=True):
        x = right
        left ^= ((((x << 1 | x >> s1) & (x << 8 | x >> s8)) ^ (x << 2 | x >> s2)) & mask) ^ key1
        x = left
        right ^= ((((x << 1 | x >> s1) & (x << 8 | x >> s8)) ^ (x << 2 | x >> s2)) & mask) ^ key2
    return left << w | right


def walk_int(value: int, max_index: int, w: int, keys: tuple[int, ...]) -> int:
    """Encrypts `value` at least once, then until it lies in [0, max_index] (cycle walking).

    Examples:
        >>> keys = int_keys(42, 8, ROUNDS)
        >>> sorted(walk_int(v, 9, 8, keys) for v in range(10))
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    value = encrypt_int(value, w, keys)
    while value > max_index:
        value = encrypt_int(value, w, keys)
    return value


def encrypt(value: Any, w: int, keys: Sequence[Any]) -> Any:
    """Encrypts a numpy or jax uint32 / uint64 array of `2 * w`-bit values.

    Numpy arrays with `w <= TABLE_ROUND_BITS` take their keys as `key_dtype(w)`.

    Examples:
        >>> keys = int_keys(42, 8, ROUNDS)
        >>> values = np.arange(4, dtype=np.uint32)
        >>> encrypt(values, 8, [np.uint16(k) for k in keys]).tolist() == [
        ...     encrypt_int(v, 8, keys) for v in range(4)]
        True
    """
    if w <= TABLE_ROUND_BITS and isinstance(value, np.ndarray):
        return _encrypt_by_table(value, w, keys)
    mask, s1, s2, s8 = np.uint32((1 << w) - 1), w - 1, w - 2, w - 8

    def f(x: Any) -> Any:  # Simon's round function, rotations within w bits
        return (((x << 1 | x >> s1) & (x << 8 | x >> s8)) ^ (x << 2 | x >> s2)) & mask

    left, right = (value >> w).astype(np.uint32), (value & mask).astype(np.uint32)
    for k in range(0, len(keys), 2):
        left = left ^ f(right) ^ keys[k]
        right = right ^ f(left) ^ keys[k + 1]
    return (left.astype(value.dtype) << w) | right.astype(value.dtype)


def key_dtype(w: int) -> type[np.unsignedinteger[Any]]:
    """The dtype numpy encryption takes its round keys in: uint16 where the table is used.

    Examples:
        >>> key_dtype(8).__name__, key_dtype(20).__name__
        ('uint16', 'uint32')
    """
    return np.uint16 if w <= TABLE_ROUND_BITS else np.uint32


def _encrypt_by_table(value: np.ndarray, w: int, keys: Sequence[Any]) -> np.ndarray:
    """`encrypt` for numpy with the round function looked up in a table of all w-bit inputs.

    One gather replaces the eleven array operations of the round function, and
    the halves are worked on in place as uint16: the keys must be uint16 too
    (`key_dtype`).
    """
    table: Any = _round_table(w)
    left: Any = (value >> w).astype(np.uint16)
    right: Any = (value & value.dtype.type((1 << w) - 1)).astype(np.uint16)
    looked_up = np.empty_like(left)
    for k in range(0, len(keys), 2):
        left ^= table.take(right, out=looked_up)
        left ^= keys[k]
        right ^= table.take(left, out=looked_up)
        right ^= keys[k + 1]
    out = left.astype(value.dtype)
    out <<= value.dtype.type(w)
    out |= right
    return out


@functools.cache
def _round_table(w: int) -> np.ndarray:
    """Simon's round function of every w-bit value: `_encrypt_by_table` looks it up."""
    x = np.arange(1 << w, dtype=np.uint32)
    mask, s1, s2, s8 = np.uint32((1 << w) - 1), w - 1, w - 2, w - 8
    table = (((x << 1 | x >> s1) & (x << 8 | x >> s8)) ^ (x << 2 | x >> s2)) & mask
    table = table.astype(np.uint16)
    table.flags.writeable = False
    return table
