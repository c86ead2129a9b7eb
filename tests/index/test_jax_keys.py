"""Tests for grainfn._src.index.jax_keys: random_map's jax keys, one rule on host and device."""

import pickle
import sys

import jax
import numpy as np

from grainfn._src.index.jax_keys import KEY_IMPL, JaxKeys, element_key, seed_key


def data(key) -> list[int]:
    return np.asarray(jax.random.key_data(key)).tolist()


def test_seed_key_is_threefry_of_the_seeds_two_words() -> None:
    assert data(seed_key(5)) == [0, 5]
    assert data(seed_key(2**40 + 3)) == [2**8, 3]  # the high word is kept in 32-bit mode
    assert str(jax.random.key_impl(seed_key(5))) == KEY_IMPL


def test_element_key_folds_epoch_then_offset_words() -> None:
    key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(seed_key(3), 2), 0), 7)
    assert data(element_key(3, np.uint32(2), np.uint32(0), np.uint32(7))) == data(key)
    assert data(element_key(3, np.uint32(2), np.uint32(1), np.uint32(7))) != data(key)


def test_host_keys_split_the_index_into_epoch_and_offset() -> None:
    keys = JaxKeys(seed=3, length=10)
    expected = element_key(3, np.uint32(2), np.uint32(0), np.uint32(4))
    assert data(keys.at(24)) == data(expected)
    assert data(keys.at(24)) != data(keys.at(4))


def test_endless_stages_have_every_position_in_epoch_zero() -> None:
    keys = JaxKeys(seed=3, length=sys.maxsize)
    position = 2**33 + 5
    expected = element_key(3, np.uint32(0), np.uint32(2), np.uint32(5))
    assert data(keys.at(position)) == data(expected)


def test_host_keys_pickle_by_seed_and_length() -> None:
    keys = JaxKeys(seed=9, length=4)
    copy = pickle.loads(pickle.dumps(keys))
    assert repr(copy) == "JaxKeys(seed=9, length=4)"
    assert data(copy.at(6)) == data(keys.at(6))
