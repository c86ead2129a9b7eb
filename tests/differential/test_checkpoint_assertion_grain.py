"""assert_equal_output_after_checkpoint against Grain 0.2.18's: any iterable with states.

Grain's assertion takes any iterable whose iterator has get_state and set_state
(an ElasticIterator, a DataLoader); so does grainfn's. The toy iterables below
are run through both assertions, so that each check (restored elements,
restored state, the state's structure, no element at all) fails in both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn

pytestmark = pytest.mark.grain


def grain_assertion() -> Any:
    import grain

    return grain.experimental.assert_equal_output_after_checkpoint


class Counter:
    """An iterable over `range(n)` whose iterator's state is a dict; `bug` breaks one thing."""

    def __init__(self, n: int, bug: str | None = None) -> None:
        self.n, self.bug = n, bug

    def __iter__(self) -> CounterIterator:
        return CounterIterator(self.n, self.bug)


class CounterIterator:
    def __init__(self, n: int, bug: str | None) -> None:
        self.n, self.bug, self.i, self.restored = n, bug, 0, False

    def __iter__(self) -> CounterIterator:
        return self

    def __next__(self) -> Any:
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        shift = 100 if self.bug == "elements" and self.restored else 0
        return {"x": np.full(2, self.i - 1 + shift), "i": self.i - 1}

    def get_state(self) -> Any:
        if self.bug == "structure" and self.i == 2:
            return {"i": str(self.i)}
        return {"i": self.i}

    def set_state(self, state: Any) -> None:
        self.restored = True
        if self.bug != "state":
            self.i = state["i"]


def loaders(lib: Any, worker_count: int) -> Any:
    """Grain's data_loader_test case: map, filter and flat_map, checkpointed at every element."""

    class PlusOne(lib.transforms.Map):
        def map(self, x: int) -> int:
            return x + 1

    class FilterEven(lib.transforms.Filter):
        def filter(self, x: int) -> bool:
            return x % 2 == 0

    class Duplicate(lib.experimental.FlatMapTransform):
        max_fan_out = 7

        def flat_map(self, element: Any) -> Any:
            yield from [element] * self.max_fan_out

    return lib.DataLoader(
        data_source=lib.sources.RangeDataSource(start=0, stop=8, step=1),
        sampler=lib.samplers.SequentialSampler(8, lib.sharding.NoSharding()),
        operations=[PlusOne(), FilterEven(), Duplicate()],
        worker_count=worker_count,
    )


def test_a_correct_iterable_passes_both() -> None:
    grain_assertion()(Counter(6))
    grainfn.experimental.assert_equal_output_after_checkpoint(Counter(6))


@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("elements", r"restored at step 0, element 0\['x'\]: array\(\[100, 100\]\)"),
        ("structure", "The state's structure changed at step 2"),
        ("state", r"restored at step 1, the state\['i'\]: 0 != 1"),
    ],
)
def test_a_broken_iterable_fails_both(bug: str, message: str) -> None:
    with pytest.raises(AssertionError):
        grain_assertion()(Counter(5, bug))
    with pytest.raises(AssertionError, match=message):
        grainfn.experimental.assert_equal_output_after_checkpoint(Counter(5, bug))


def test_an_empty_iterable_fails_both() -> None:
    with pytest.raises(AssertionError):
        grain_assertion()(Counter(0))
    with pytest.raises(AssertionError, match="gave no element"):
        grainfn.experimental.assert_equal_output_after_checkpoint(Counter(0))


def test_an_iterable_without_states_is_refused() -> None:
    with pytest.raises(AttributeError):
        grain_assertion()([1, 2, 3])
    with pytest.raises(TypeError, match="has no get_state and set_state"):
        grainfn.experimental.assert_equal_output_after_checkpoint([1, 2, 3])


def elastic(lib: Any, workers: int) -> Any:
    ds = lib.MapDataset.range(40).map(lambda x: x * 2).shuffle(42)
    options = lib.MultiprocessingOptions(num_workers=workers)
    return lib.experimental.ElasticIterator(
        ds, 5, lib.sharding.NoSharding(), multiprocessing_options=options
    )


@pytest.mark.parametrize("workers", [0, 2])  # Grain's own workers need absl flags: 0 only
def test_elastic_iterators_pass_both(workers: int) -> None:
    import grain

    grain_assertion()(elastic(grain, 0))
    grainfn.experimental.assert_equal_output_after_checkpoint(elastic(grainfn, workers))
    assert [b.tolist() for b in elastic(grainfn, workers)] == [
        b.tolist() for b in elastic(grain, 0)
    ]


def test_a_user_iterdataset_with_its_own_iterator_passes() -> None:
    class Counted(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return CounterIterator(7, None)

    grainfn.experimental.assert_equal_output_after_checkpoint(Counted())

    class Broken(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return CounterIterator(4, "elements")

    with pytest.raises(AssertionError, match="restored at step 0, element 0"):
        grainfn.experimental.assert_equal_output_after_checkpoint(Broken())


@pytest.mark.parametrize("workers", [0, 2])
def test_data_loaders_with_flat_map_pass(workers: int) -> None:
    import grain

    grain_assertion()(loaders(grain, 0))
    grainfn.experimental.assert_equal_output_after_checkpoint(loaders(grainfn, workers))
    assert list(loaders(grainfn, workers)) == list(loaders(grain, 0))
