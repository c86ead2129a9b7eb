"""Tests for grainfn._src.index.rng: per-element Philox generators."""

import pickle
import threading

import numpy as np

from grainfn._src.index.rng import ElementRng, rewind


def draws(generator: np.random.Generator) -> list[int]:
    return generator.integers(0, 2**31, size=5).tolist()


def test_an_elements_draws_depend_on_seed_and_index_alone() -> None:
    rngs = ElementRng(seed=3)
    first = draws(rngs.at(5))
    draws(rngs.at(6))
    assert draws(rngs.at(5)) == first
    assert draws(ElementRng(seed=3).at(5)) == first
    assert draws(rngs.at(6)) != first
    assert draws(ElementRng(seed=4).at(5)) != first


def test_element_draws_equal_a_philox_generator_at_counter_zero_zero_zero_index() -> None:
    key = np.random.SeedSequence(3).generate_state(2, dtype=np.uint64)
    generator = np.random.Generator(np.random.Philox(key=key))
    rewind(generator, 5)
    assert draws(ElementRng(seed=3).at(5)) == draws(generator)


def test_rewind_discards_buffered_draws_and_takes_the_stage_seed() -> None:
    generator = np.random.Generator(np.random.Philox(7))
    rewind(generator, 3)
    first = draws(generator)
    generator.integers(0, 2**31, dtype=np.uint32)  # leaves half a word buffered
    rewind(generator, 3)
    assert draws(generator) == first
    rewind(generator, 3, op_seed=1)
    assert generator.bit_generator.state["state"]["counter"].tolist() == [0, 0, 1, 3]
    assert draws(generator) != first


def test_threads_get_their_own_generator_with_the_same_draws() -> None:
    rngs = ElementRng(seed=11)
    expected = draws(rngs.at(2))
    seen: list[list[int]] = []
    thread = threading.Thread(target=lambda: seen.append(draws(rngs.at(2))))
    thread.start()
    thread.join()
    assert seen == [expected]


def test_pickles_by_seed_and_names_it() -> None:
    rngs = ElementRng(seed=8)
    copy = pickle.loads(pickle.dumps(rngs))
    assert draws(copy.at(4)) == draws(rngs.at(4))
    assert repr(copy) == "ElementRng(seed=8)"
