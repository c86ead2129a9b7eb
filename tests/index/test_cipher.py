"""Tests for grainfn._src.index.cipher: keys, block sizes and encryption on ints and arrays."""

import numpy as np
import pytest

from grainfn._src.index import cipher
from grainfn._src.index.cipher import ROUNDS, SEED_SEQ_INIT


@pytest.mark.parametrize(
    ("max_index", "bits"),
    [(0, 16), (2**16 - 1, 16), (2**16, 18), (2**17, 18), (2**18, 20), (2**63 - 2, 64)],
)
def test_block_bits_are_even_and_at_least_sixteen(max_index: int, bits: int) -> None:
    assert cipher.block_bits(max_index) == bits
    assert max_index < 2**bits


@pytest.mark.parametrize("rounds", [4, 8, 30])
def test_keys_on_arrays_equal_keys_on_ints(rounds: int) -> None:
    seeds = [0, 1, 12345, 2**31, 2**32 - 1]
    ints = [cipher.generate_keys(s, SEED_SEQ_INIT, lambda x: x & cipher.M32, rounds) for s in seeds]
    init = np.full(len(seeds), SEED_SEQ_INIT, np.uint32)
    arrays = cipher.generate_keys(np.array(seeds, np.uint32), init, lambda x: x, rounds)
    assert len(arrays) == rounds
    assert [[int(word[i]) for word in arrays] for i in range(len(seeds))] == ints
    assert all(0 <= k < 2**32 for keys in ints for k in keys)


def test_int_keys_are_masked_to_the_half_block_and_differ_by_seed() -> None:
    keys = cipher.int_keys(7, 8, ROUNDS)
    full = cipher.generate_keys(7, SEED_SEQ_INIT, lambda x: x & cipher.M32)
    assert keys == tuple(k & 0xFF for k in full)
    assert cipher.int_keys(8, 8, ROUNDS) != keys
    masked = cipher.array_keys(np.array([7], np.uint32), np.full(1, SEED_SEQ_INIT, np.uint32), 8)
    assert [int(k[0]) for k in masked] == list(keys)


def test_encrypt_int_is_a_bijection_of_the_block() -> None:
    keys = cipher.int_keys(42, 8, ROUNDS)
    encrypted = {cipher.encrypt_int(v, 8, keys) for v in range(1 << 16)}
    assert encrypted == set(range(1 << 16))


def test_encrypt_on_arrays_is_a_bijection_of_the_block() -> None:
    keys = [np.uint16(k) for k in cipher.int_keys(42, 10, ROUNDS)]
    encrypted = cipher.encrypt(np.arange(1 << 20, dtype=np.uint32), 10, keys)
    assert np.array_equal(np.sort(encrypted), np.arange(1 << 20))


def test_walk_int_permutes_the_range_and_always_encrypts() -> None:
    keys = cipher.int_keys(3, 8, ROUNDS)
    walked = [cipher.walk_int(v, 999, 8, keys) for v in range(1000)]
    assert sorted(walked) == list(range(1000))
    # With the whole block in range, one walk is one encryption.
    assert cipher.walk_int(5, 2**16 - 1, 8, keys) == cipher.encrypt_int(5, 8, keys)


@pytest.mark.parametrize(
    ("w", "dtype"), [(8, np.uint32), (16, np.uint32), (20, np.uint64), (31, np.uint64)]
)
def test_encrypt_on_arrays_equals_encrypt_int(w: int, dtype: type) -> None:
    keys = cipher.int_keys(2**32 - 1, w, ROUNDS)
    values = np.array([0, 1, 2, (1 << 2 * w) - 1, (1 << 2 * w) // 3], dtype=dtype)
    array_keys = [cipher.key_dtype(w)(k) for k in keys]
    encrypted = cipher.encrypt(values, w, array_keys)
    assert encrypted.dtype == dtype
    assert encrypted.tolist() == [cipher.encrypt_int(int(v), w, keys) for v in values]


def test_key_dtype_is_uint16_up_to_the_table_bits() -> None:
    assert cipher.key_dtype(cipher.TABLE_ROUND_BITS) is np.uint16
    assert cipher.key_dtype(cipher.TABLE_ROUND_BITS + 1) is np.uint32
