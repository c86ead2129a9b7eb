"""fn.from_iterable, and Grain-style IterDataset subclasses with their own __iter__, composed."""

from __future__ import annotations

import itertools
from typing import Any

import grain
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn
from grainfn import fn

from support import conformance


@given(st.lists(st.integers(), max_size=30), st.integers(0, 30))
def test_the_elements_of_the_iterable_and_a_resume_from_any_state(
    values: list[int], at: int
) -> None:
    stream = fn.from_iterable(values)
    it = fn.iterate(stream)
    states = [it.state]
    for _ in it:
        states.append(it.state)
    assert list(fn.iterate(stream)) == values
    start = min(at, len(values))
    assert list(fn.iterate(stream, states[start])) == values[start:]


def make_dataset_class(module: Any) -> Any:
    """A user's IterDataset with its own checkpointable iterator, as Grain users write them."""

    class Countdown(module.DatasetIterator):
        def __init__(self, start: int) -> None:
            super().__init__()
            self.value = start

        def __next__(self) -> int:
            if self.value <= 0:
                raise StopIteration
            self.value -= 1
            return self.value

        def get_state(self) -> dict[str, Any]:
            return {"value": self.value}

        def set_state(self, state: dict[str, Any]) -> None:
            self.value = state["value"]

    class CountdownDataset(module.IterDataset):
        def __init__(self, start: int) -> None:
            super().__init__()
            self.start = start

        def __iter__(self) -> Any:
            return Countdown(self.start)

    return CountdownDataset


def composed(module: Any) -> Any:
    ds = make_dataset_class(module)(20)
    return ds.map(lambda x: x * 10).filter(lambda x: x % 30 != 0).batch(3)


@pytest.mark.grain
def test_a_user_iter_dataset_composes_with_later_stages_as_in_grain() -> None:
    ours = [b.tolist() for b in composed(grainfn)]
    theirs = [b.tolist() for b in composed(grain)]
    assert ours == theirs
    options = grainfn.MultiprocessingOptions(num_workers=2)
    prefetched = make_dataset_class(grainfn)(5).map(lambda x: x + 1).mp_prefetch(options)
    assert list(prefetched) == [5, 4, 3, 2, 1]


def test_a_composed_user_dataset_checkpoints_and_restores() -> None:
    ds = composed(grainfn)
    it = iter(ds)
    head = [next(it).tolist() for _ in range(2)]
    state = it.get_state()
    rest = [b.tolist() for b in it]
    again = iter(ds)
    again.set_state(state)
    assert [b.tolist() for b in again] == rest
    assert head + rest == [b.tolist() for b in ds]
    assert iter(make_dataset_class(grainfn)(3)).get_state() == {"value": 3}  # its own iterator


def test_iterators_and_states_past_the_end_are_refused() -> None:
    with pytest.raises(TypeError, match="an iterator can be read once only"):
        fn.from_iterable(iter([1, 2]))
    with pytest.raises(ValueError, match="the iterable gives 2"):
        list(fn.iterate(fn.from_iterable([1, 2]), fn.IterablePosition(5)))
    assert list(itertools.islice(fn.iterate(fn.from_iterable(range(10**9))), 3)) == [0, 1, 2]


test_conforms = conformance.conforms(
    conformance.Example("from_iterable(range)", lambda: fn.from_iterable(range(6))),
)
