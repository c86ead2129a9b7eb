"""fn.cache: the parent's elements and states, read once.

The facade's CacheIterDataset, against Grain's, is tested in tests/facade/test_cache.py.
"""

from __future__ import annotations

import itertools
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import grainfn
import grainfn.testing
from grainfn import fn
from grainfn.testing import add_one, assert_elements_equal

from support import conformance


def run(stream: fn.Stream, limit: int = 200) -> tuple[list[Any], list[Any]]:
    it = fn.iterate(stream)
    elements, states = [], [it.state]
    for element in itertools.islice(it, limit):
        elements.append(element)
        states.append(it.state)
    it.close()
    return elements, states


@given(grainfn.testing.streams(), st.integers(0, 30))
def test_the_elements_and_states_are_the_parents_on_every_pass(stream: fn.Stream, at: int) -> None:
    cached = fn.cache(stream)
    expected, states = run(stream)
    for _ in range(2):  # the first pass fills the cache, the second reads it
        got, got_states = run(cached)
        assert_elements_equal(got, expected)
        assert got_states == states
    start = min(at, len(states) - 1)
    resumed = fn.iterate(cached, states[start])
    assert_elements_equal(list(itertools.islice(resumed, 200 - start)), expected[start:])


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: int) -> int:
        self.calls += 1
        return x * 2


def test_a_repeat_over_a_cache_reads_the_parent_once() -> None:
    count = Counting()
    stream = fn.repeat(3, fn.cache(fn.map(count, fn.from_dataset(fn.range(5)))))
    assert list(fn.iterate(stream)) == [0, 2, 4, 6, 8] * 3
    assert count.calls == 5


def test_a_pipeline_with_a_cache_pickles_and_runs_under_workers() -> None:
    stream = fn.cache(fn.filter(lambda x: x % 3, fn.from_dataset(fn.range(40))))
    copy = pickle.loads(pickle.dumps(fn.cache(fn.from_dataset(fn.range(4)))))
    assert list(fn.iterate(copy)) == [0, 1, 2, 3]
    with_workers = fn.mp_prefetch(2, fn.repeat(2, stream))
    assert list(fn.iterate(with_workers)) == list(fn.iterate(fn.repeat(2, stream)))


test_conforms = conformance.conforms(
    conformance.Example("cache()", lambda: fn.cache(fn.map(add_one, conformance.numbers(5)))),
)
