"""Grain's get_next_index and set_next_index: a pipeline's position as one integer."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.grain_states.next_index import at_next_index, next_index


def advanced(stream: Any, count: int) -> Any:
    """The state of `stream` after `count` elements."""
    iterator = fn.iterate(stream)
    for _ in itertools.islice(iterator, count):
        pass
    return iterator.state


PIPELINES = {
    "from_dataset": lambda: fn.from_dataset(fn.range(10)),
    "map": lambda: fn.map(str, fn.from_dataset(fn.range(10))),
    "limit": lambda: fn.limit(8, fn.from_dataset(fn.range(10))),
    "random_map": lambda: fn.random_map(lambda x, rng: x, fn.from_dataset(fn.range(10)), seed=1),
    "prefetch": lambda: fn.mp_prefetch(2, fn.from_dataset(fn.range(10))),
    "interleave of one": lambda: fn.interleave(1, fn.source([fn.range(10)])),
}


@pytest.mark.parametrize("make", PIPELINES.values(), ids=PIPELINES.keys())
def test_one_to_one_stages_count_the_elements_read(make: Any) -> None:
    stream = make()
    for count in (0, 1, 4):
        state = advanced(stream, count)
        assert next_index(stream, state) == count
        moved = at_next_index(stream, stream.init(), count)
        assert next_index(stream, moved) == count
        assert list(itertools.islice(fn.iterate(stream, moved), 2)) == list(
            itertools.islice(fn.iterate(stream, state), 2)
        )


def test_a_batch_counts_batches_rounding_a_partial_one_up() -> None:
    stream = fn.batch(3, fn.from_dataset(fn.range(10)))
    assert next_index(stream, advanced(stream, 2)) == 2
    assert next_index(stream, fn.DatasetPosition(4)) == 2  # inside the second batch
    state = at_next_index(stream, stream.init(), 3)
    assert state == fn.DatasetPosition(9)
    assert [b.tolist() for b in fn.iterate(stream, state)] == [[9]]


def test_a_counter_keeps_the_index_as_its_count() -> None:
    stream = fn.limit(5, fn.from_dataset(fn.range(10)))
    state = at_next_index(stream, stream.init(), 3)
    assert state.taken == 3 and state.parent == fn.DatasetPosition(3)
    assert list(fn.iterate(stream, state)) == [3, 4]


def test_an_index_past_the_end_of_the_dataset_read_is_refused() -> None:
    stream = fn.from_dataset(fn.range(10))
    assert at_next_index(stream, stream.init(), 10) == fn.DatasetPosition(10)  # the end
    with pytest.raises(IndexError, match="index 11 is past the end of the dataset read, of length"):
        at_next_index(stream, stream.init(), 11)


def test_stages_without_one_index_are_refused_by_name() -> None:
    filtered = fn.filter(lambda x: x % 2, fn.from_dataset(fn.range(10)))
    with pytest.raises(NotImplementedError, match="position of the stage 'filter"):
        next_index(filtered, filtered.init())
    with pytest.raises(NotImplementedError, match="use get_state and set_state"):
        at_next_index(filtered, filtered.init(), 2)
    two = fn.interleave(2, fn.source([fn.range(3), fn.range(4)]))
    with pytest.raises(NotImplementedError, match="get_next_index is not supported for an Interl"):
        next_index(two, two.init())
    with pytest.raises(NotImplementedError, match=r"set_next_index is not supported .* 2 datasets"):
        at_next_index(two, two.init(), 1)
