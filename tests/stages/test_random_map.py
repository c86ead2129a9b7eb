"""random_map: draws that depend only on the seed and the position, resumable on streams."""

from __future__ import annotations

import pickle

import cloudpickle
import numpy as np
import pytest

from grainfn import fn

from support import conformance


def draw_int(x: int, rng: np.random.Generator) -> int:
    return int(rng.integers(1000))


def test_random_map_depends_only_on_seed_and_index() -> None:
    draw = fn.random_map(lambda x, rng: (x, rng.integers(2**62)), fn.range(50), seed=11)
    block = draw.get_many(range(50))
    assert [draw.get(i) for i in range(50)] == block
    assert draw.get_many([7, 3]) == [block[7], block[3]]
    assert len({d for _, d in block}) == 50
    assert draw.get(57)[1] != block[7][1]  # a later epoch draws new numbers
    copy = pickle.loads(cloudpickle.dumps(draw))
    assert copy.get_many(range(50)) == block


def test_a_stream_draws_what_the_dataset_draws_and_resumes_from_a_dict() -> None:
    expected = fn.random_map(draw_int, fn.range(5), seed=3).get_many(range(5))
    stream = fn.random_map(draw_int, fn.from_dataset(fn.range(5)), seed=3)
    assert stream.describe_stage() == "random_map(draw_int, seed=3)"
    it = fn.iterate(stream)
    assert [next(it), next(it)] == expected[:2]
    assert it.state == fn.IndexedState(2, fn.DatasetPosition(2))
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert list(fn.iterate(stream, restored)) == expected[2:]


def test_a_count_past_the_parents_state_is_refused_naming_the_field() -> None:
    stream = fn.random_map(draw_int, fn.from_dataset(fn.range(5)), seed=3)
    with pytest.raises(ValueError, match="State field seen is 4, but at most 2 fits the parent's"):
        stream.step(fn.IndexedState(4, fn.DatasetPosition(2)))


test_conforms = conformance.conforms(
    conformance.Example(
        "random_map(draw, seed=1)",
        lambda: fn.random_map(conformance.draw, fn.range(6), seed=1),
    ),
    conformance.Example(
        "random_map(draw, seed=1)",
        lambda: fn.random_map(conformance.draw, conformance.numbers(6), seed=1),
    ),
)
