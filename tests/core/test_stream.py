"""Streams: pure stepping, the end signal, states as records, dicts and pytrees."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings

from grainfn import fn, testing


def numbers(n: int = 10) -> fn.Stream:
    return fn.from_dataset(fn.range(n))


def test_step_is_pure_and_matches_iterate() -> None:
    stream = fn.batch(3, fn.random_map(lambda x, rng: x + rng.random(), numbers(), seed=1))
    state = stream.init()
    stepped = []
    while True:
        element, next_state = stream.step(state)
        again, again_state = stream.step(state)
        assert again_state == next_state
        if element is fn.END:
            assert again is fn.END
            break
        np.testing.assert_array_equal(element, again)
        stepped.append(element)
        state = next_state
    iterated = list(fn.iterate(stream))
    assert len(stepped) == len(iterated) == 4
    for a, b in zip(stepped, iterated):
        np.testing.assert_array_equal(a, b)


def test_stepping_past_the_end_keeps_signalling_the_end() -> None:
    streams = [
        fn.limit(2, numbers()),
        fn.mix([numbers(2), numbers(5)]),
        fn.repeat(2, numbers(2)),
        fn.batch(4, numbers(5), drop_remainder=True),
        fn.repeat(None, fn.from_dataset(fn.source([]))),
    ]
    for stream in streams:
        state = stream.init()
        for _ in range(20):
            element, state = stream.step(state)
        for _ in range(3):
            element, state = stream.step(state)
            assert element is fn.END


def test_states_keep_one_shape_and_are_jax_pytrees() -> None:
    import jax

    stream = fn.mix(
        {"a": fn.random_map(lambda x, r: x, numbers(), seed=2), "b": fn.limit(5, numbers())},
        {"a": 2, "b": 1},
    )
    it = fn.iterate(stream)
    structures = {jax.tree_util.tree_structure(it.state)}
    for _ in it:
        structures.add(jax.tree_util.tree_structure(it.state))
        assert all(isinstance(leaf, (int, bool)) for leaf in jax.tree_util.tree_leaves(it.state))
    assert len(structures) == 1
    doubled = jax.tree_util.tree_map(lambda x: x, it.state)
    assert doubled == it.state


def test_state_dict_round_trips_through_json() -> None:
    stream = fn.repeat(3, fn.filter(lambda x: x % 2, numbers()))
    it = fn.iterate(stream)
    next(it), next(it), next(it), next(it), next(it), next(it)
    text = json.dumps(fn.state_to_dict(stream, it.state))
    restored = fn.state_from_dict(stream, json.loads(text))
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == list(it)


def test_resuming_far_into_a_stream_reads_from_there_directly() -> None:
    stream = fn.from_dataset(fn.map(lambda x: x * 2, fn.range(2 * 10**6)))
    it = fn.iterate(stream, fn.DatasetPosition(10**6))
    assert next(it) == 2 * 10**6
    assert it.state == fn.DatasetPosition(10**6 + 1)


def test_foreign_states_are_refused_naming_what_differs() -> None:
    counted = fn.random_map(lambda x, r: x, numbers(), seed=0)
    with pytest.raises(ValueError, match=r"stage random_map.*expects a IndexedState, got Dataset"):
        counted.step(fn.DatasetPosition(3))
    with pytest.raises(ValueError, match=r"parent\.position must be an integer >= 0, got -1"):
        counted.step(fn.IndexedState(0, fn.DatasetPosition(-1)))
    with pytest.raises(ValueError, match="position is 99, past the end of a dataset of length 10"):
        fn.iterate(numbers(), fn.DatasetPosition(99))
    with pytest.raises(IndexError, match="position is 11, past the end"):  # as Grain's error
        fn.iterate(numbers(), fn.DatasetPosition(11))
    mixed = fn.mix([numbers(), numbers()])
    with pytest.raises(ValueError, match="components must hold 2 component states"):
        mixed.step(fn.MixState(0, False, (fn.DatasetPosition(0),)))

    saved = fn.state_to_dict(numbers(), numbers().init())
    other = fn.from_dataset(fn.range(11))
    with pytest.raises(ValueError, match=r"another pipeline: stage line 1 is 'range\(0, 10, 1\)"):
        fn.state_from_dict(other, saved)
    with pytest.raises(ValueError, match="State version 7 is not supported"):
        fn.state_from_dict(numbers(), {**saved, "version": 7})
    with pytest.raises(ValueError, match="key 'state' is missing"):
        fn.state_from_dict(numbers(), {"version": 1, "pipeline": saved["pipeline"]})
    truncated = {**saved, "state": {"kind": "DatasetPosition"}}
    with pytest.raises(ValueError, match="field position of DatasetPosition is missing"):
        fn.state_from_dict(numbers(), truncated)
    mistyped = {**saved, "state": {"kind": "DatasetPosition", "position": "5"}}
    with pytest.raises(ValueError, match=r"field position must be an integer.*got '5' \(str\)"):
        fn.state_from_dict(numbers(), mistyped)


@settings(max_examples=60)
@given(testing.streams())
def test_every_random_stream_is_resumable(stream: fn.Stream) -> None:
    testing.assert_resumable(lambda: stream, max_elements=60, resume_points=6)


@settings(max_examples=60)
@given(testing.datasets())
def test_every_random_dataset_is_deterministic(ds: fn.Dataset) -> None:
    testing.assert_deterministic(lambda: ds, max_elements=100)


def test_an_endless_dataset_that_filters_everything_is_checked_in_bounded_time() -> None:
    spec = (("range", 1), ("map", "add_one"), ("repeat", None, False), ("filter", "keep_even"))
    ds = testing.build_dataset(spec)  # [1, 1, 1, ...] with every element filtered out
    assert ds.get_many(range(5)) == [None] * 5
    testing.assert_deterministic(lambda: ds, max_elements=50)  # reads positions, not elements
    assert testing._builds(testing.build_dataset, spec) is not None


def test_assertions_catch_nondeterminism() -> None:
    import itertools

    counter = itertools.count()

    def make() -> fn.Dataset:
        offset = next(counter)
        return fn.map(lambda x: x + offset, fn.range(3))

    with pytest.raises(AssertionError, match="element 0 of a second build"):
        testing.assert_deterministic(make)
