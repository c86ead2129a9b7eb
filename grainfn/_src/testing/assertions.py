"""Determinism assertions for users' own pipelines (and ours)."""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import as_stream, iterate
from grainfn._src.core.state import state_from_dict, state_to_dict
from grainfn._src.core.stream import END


def assert_elements_equal(a: Any, b: Any, where: str = "element") -> None:
    """Asserts two elements are equal leaf by leaf, arrays by dtype, shape and value; NaN == NaN.

    Examples:
        >>> assert_elements_equal({"x": np.arange(3)}, {"x": np.arange(3)})
        >>> assert_elements_equal([float("nan")], [np.float32("nan")])
        >>> assert_elements_equal([1, 2], [1, 3])
        Traceback (most recent call last):
        ...
        AssertionError: element[1]: 2 != 3
    """
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            raise AssertionError(f"{where}: {a!r} != {b!r} (only one is an array)")
        if a.dtype != b.dtype or a.shape != b.shape:
            raise AssertionError(f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            raise AssertionError(f"{where}: {a!r} != {b!r}")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            raise AssertionError(f"{where}: keys {sorted(map(str, a))} != {sorted(map(str, b))}")
        for key in a:
            assert_elements_equal(a[key], b[key], f"{where}[{key!r}]")
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            raise AssertionError(f"{where}: {a!r} != {b!r}")
        for i, (x, y) in enumerate(zip(a, b)):
            assert_elements_equal(x, y, f"{where}[{i}]")
        return
    if a != b and not (_is_nan(a) and _is_nan(b)):
        raise AssertionError(f"{where}: {a!r} != {b!r}")


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def assert_deterministic(make: Callable[[], Any], *, max_elements: int = 1000) -> None:
    """Asserts that two builds of a pipeline, and a pickled copy, yield the same elements.

    A dataset is compared at its first `max_elements` positions, None where a
    filter removed the element (so an endless dataset that filters everything
    out is read in bounded time); a stream by its first `max_elements` elements.

    Args:
        make: Builds the pipeline: a grainfn Dataset or Stream.
        max_elements: How many positions (dataset) or elements (stream) to compare at most.

    Examples:
        >>> from grainfn import fn
        >>> assert_deterministic(lambda: fn.shuffle(fn.seed(1, fn.range(50))))
    """
    first = _read(make(), max_elements)
    again = _read(make(), max_elements)
    copy = pickle.loads(cloudpickle.dumps(make()))
    shipped = _read(copy, max_elements)
    for name, other in (("a second build", again), ("a pickled copy", shipped)):
        if len(other) != len(first):
            raise AssertionError(f"{name} yields {len(other)} elements, the first {len(first)}")
        for position, (x, y) in enumerate(zip(first, other)):
            assert_elements_equal(x, y, f"element {position} of {name}")


def assert_resumable(
    make: Callable[[], Any], *, max_elements: int = 200, resume_points: int = 12
) -> None:
    """Asserts that resuming from the state saved after any k elements gives the same rest.

    The state goes through its JSON form (`state_to_dict`, `json.dumps`,
    `json.loads`, `state_from_dict`) into a freshly built pipeline, as a
    checkpoint would. `step` from the same state is also checked to be pure.

    Args:
        make: Builds the pipeline: a grainfn Stream, or a Dataset read with `from_dataset`.
        max_elements: How many elements to read at most.
        resume_points: How many values of k to try, spread over the run (first and last included).

    Examples:
        >>> from grainfn import fn
        >>> assert_resumable(lambda: fn.batch(3, fn.from_dataset(fn.range(10))))
    """
    stream = as_stream(make(), "make()")
    iterator = iterate(stream)
    elements: list[Any] = []
    saved = [json.dumps(state_to_dict(stream, iterator.state))]
    for element in itertools.islice(iterator, max_elements):
        elements.append(element)
        saved.append(json.dumps(state_to_dict(stream, iterator.state)))
    count = len(elements)
    points = sorted({round(i * count / max(1, resume_points - 1)) for i in range(resume_points)})
    for k in points:
        fresh = as_stream(make(), "make()")
        state = state_from_dict(fresh, json.loads(saved[k]))
        rest = list(itertools.islice(iterate(fresh, state), count - k))
        if len(rest) != count - k:
            raise AssertionError(
                f"resumed after {k} elements: {len(rest)} left, expected {count - k}"
            )
        for offset, (x, y) in enumerate(zip(elements[k:], rest)):
            assert_elements_equal(y, x, f"element {k + offset} resumed after {k}")
        element, after = fresh.step(state)
        again, after_again = fresh.step(state)
        if k < count:
            assert_elements_equal(element, elements[k], f"step from the state after {k}")
            assert_elements_equal(again, element, f"a second step from the state after {k}")
            if after != after_again:
                raise AssertionError(f"step after {k} gave states {after} and {after_again}")
        elif count < max_elements and (element is not END or again is not END):
            raise AssertionError(f"step past the end gave {element!r}, not END")


def _read(value: Any, max_elements: int) -> list[Any]:
    if isinstance(value, Dataset):
        return value.get_many(np.arange(min(value.length, max_elements), dtype=np.int64))
    return list(itertools.islice(iterate(value), max_elements))
