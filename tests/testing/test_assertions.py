"""Tests for grainfn._src.testing.assertions: what each determinism assertion passes and refuses."""

import itertools
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.testing import assertions
from grainfn._src.testing.assertions import (
    assert_deterministic,
    assert_elements_equal,
    assert_iterator_restores,
    assert_resumable,
    state_spec,
)


def test_equal_elements_pass_leaf_by_leaf_with_nan_equal_to_nan() -> None:
    assert_elements_equal(
        {"x": np.arange(3), "y": (1, [2.0])}, {"x": np.arange(3), "y": (1, [2.0])}
    )
    assert_elements_equal(float("nan"), np.float32("nan"))
    assert_elements_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1, 2], [1, 3], r"^element\[1\]: 2 != 3$"),
        ({"a": 1}, {"b": 1}, r"^element: keys \['a'\] != \['b'\]$"),
        ({"a": [1]}, {"a": (1,)}, r"^element\['a'\]: \[1\] != \(1,\)$"),
        ([1], [1, 2], r"^element: \[1\] != \[1, 2\]$"),
        (np.arange(2), [0, 1], r"only one is an array"),
        (np.arange(2), np.arange(2.0), r"^element: int64\(2,\) != float64\(2,\)$"),
        (np.arange(2), np.arange(1, 3), r"^element: array\(\[0, 1\]\) != array\(\[1, 2\]\)$"),
        (np.array([np.nan]).astype(object), np.array([np.nan]).astype(object), "array"),
    ],
)
def test_different_elements_fail_naming_where(a: Any, b: Any, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        assert_elements_equal(a, b)


def test_deterministic_pipelines_pass_and_an_unseeded_draw_fails() -> None:
    assert_deterministic(lambda: fn.shuffle(fn.seed(1, fn.range(50))))
    assert_deterministic(lambda: fn.batch(3, fn.from_dataset(fn.range(10))), max_elements=2)
    counter = itertools.count()

    def drifting() -> Any:
        start = next(counter)
        return fn.range(start, start + 5)

    with pytest.raises(AssertionError, match="element 0 of a second build: 0 != 1"):
        assert_deterministic(drifting)


def test_deterministic_compares_at_most_max_elements_of_an_endless_dataset() -> None:
    assert_deterministic(lambda: fn.repeat(None, fn.range(3)), max_elements=7)


def test_resumable_streams_pass() -> None:
    assert_resumable(lambda: fn.batch(3, fn.from_dataset(fn.shuffle(fn.range(10), seed=2))))
    assert_resumable(lambda: fn.range(5))  # a dataset is read with from_dataset


class Restartable:
    """An iterable whose iterators restore from `{"i": n}` states, optionally with a defect."""

    def __init__(self, length: int = 4, forget: bool = False, reshape: bool = False) -> None:
        self.length, self.forget, self.reshape = length, forget, reshape

    def __iter__(self) -> Any:
        return Restarting(self)


class Restarting:
    def __init__(self, owner: Restartable) -> None:
        self.owner, self.i = owner, 0

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> int:
        if self.i >= self.owner.length:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def get_state(self) -> Any:
        if self.owner.reshape and self.i == 2:
            return {"i": str(self.i)}
        return {"i": self.i}

    def set_state(self, state: Any) -> None:
        if not self.owner.forget:
            self.i = int(state["i"])


def test_iterator_restores_passes_for_iterators_that_restore() -> None:
    assert_iterator_restores(Restartable())
    assert_iterator_restores(Restartable(length=100), max_elements=5)


def test_iterator_restores_names_what_went_wrong() -> None:
    with pytest.raises(AssertionError, match=r"restored at step 1, the state\['i'\]: 0 != 1"):
        assert_iterator_restores(Restartable(forget=True))
    with pytest.raises(AssertionError, match=r"structure changed at step 2: it was \{'i': 'int'\}"):
        assert_iterator_restores(Restartable(reshape=True))
    with pytest.raises(AssertionError, match="gave no element: there is nothing to restore"):
        assert_iterator_restores(Restartable(length=0))
    with pytest.raises(TypeError, match="which has no get_state and set_state"):
        assert_iterator_restores([1, 2])


def test_state_spec_keeps_structure_and_leaf_types() -> None:
    assert state_spec({"next_index": 3, "workers": [0, 1]}) == {
        "next_index": "int",
        "workers": "list<int>",
    }
    assert state_spec(np.zeros((2, 3), np.int32)) == "ndarray<int32>(2, 3)"
    assert state_spec(()) == "tuple<>"
    assert state_spec([1, "a"]) == ["int", "str"]
    assert state_spec((1, None)) == ("int", "NoneType")


def test_read_takes_positions_of_a_dataset_and_elements_of_a_stream() -> None:
    assert assertions._read(fn.range(10), 3) == [0, 1, 2]
    assert assertions._read(fn.from_dataset(fn.range(10)), 4) == [0, 1, 2, 3]
