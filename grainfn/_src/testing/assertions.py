"""Determinism assertions for users' own pipelines (and ours)."""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle
import numpy as np

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import as_stream, iterate
from grainfn._src.core.state_codec import state_from_dict, state_to_dict
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


def assert_iterator_restores(iterable: Iterable[Any], *, max_elements: int = 1000) -> None:
    """Asserts that a new iterator set to any state an iterator was in yields the same rest.

    For any iterable whose iterators have `get_state` and `set_state` (a
    DataLoader, an ElasticIterator, ...), the checks of Grain's
    `assert_equal_output_after_checkpoint`: one iterator reads up to
    `max_elements` elements and keeps its state before each, and the state's
    structure (`state_spec`) must not change meanwhile; then for every state
    kept, `iter(iterable)` set to it must give that state back and the same
    rest (ending where the first ended, unless the first was cut at
    `max_elements`). `iter(iterable)` may be one shared iterator, as an
    ElasticIterator's is: each check then sets it anew.

    Args:
        iterable: What to check; `iter(iterable)` gives an iterator with
            `get_state()` and `set_state(state)`.
        max_elements: How many elements to read at most.

    Raises:
        AssertionError: naming the step, the state and what differs.
        TypeError: if the iterator has no `get_state` and `set_state`.

    Examples:
        >>> import grainfn as grain
        >>> loader = grain.DataLoader(
        ...     data_source=[1, 2, 3],
        ...     sampler=grain.samplers.SequentialSampler(3, grain.sharding.NoSharding()),
        ... )
        >>> assert_iterator_restores(loader)
    """
    iterator: Any = iter(iterable)
    if not all(callable(getattr(iterator, name, None)) for name in ("get_state", "set_state")):
        raise TypeError(
            f"iter({iterable!r}) gave a {type(iterator).__qualname__}, which has no get_state "
            "and set_state: there is no state to restore."
        )
    states: list[Any] = []
    elements: list[Any] = []
    spec = state_spec(iterator.get_state())
    ended = False
    while len(elements) < max_elements:
        state = iterator.get_state()
        if state_spec(state) != spec:
            raise AssertionError(
                f"The state's structure changed at step {len(elements)}: it was {spec}, "
                f"it is {state_spec(state)}; a state should keep one shape for an iterator's life."
            )
        try:
            element = next(iterator)
        except StopIteration:
            ended = True
            break
        states.append(state)
        elements.append(element)
    if not elements:
        raise AssertionError(f"{iterable!r} gave no element: there is nothing to restore.")
    for step, state in enumerate(states):
        restored: Any = iter(iterable)
        restored.set_state(state)
        assert_elements_equal(restored.get_state(), state, f"restored at step {step}, the state")
        expected = elements[step:]
        rest = list(itertools.islice(restored, len(expected) + int(ended)))
        if len(rest) != len(expected):
            raise AssertionError(
                f"Restored at step {step}, the iterator gave {len(rest)} elements where the first "
                f"gave {len(expected)}{'' if ended else ' or more'} (state {state!r})."
            )
        for offset, (x, y) in enumerate(zip(expected, rest)):
            assert_elements_equal(y, x, f"restored at step {step}, element {step + offset}")


def state_spec(state: Any) -> Any:
    """The structure of a state with its leaves' types: what must not change while iterating.

    A list or tuple of leaves of one type counts as one leaf (its length may
    change), an array by its dtype and shape, as in Grain's check.

    Examples:
        >>> state_spec({"next_index": 3, "workers": [0, 1]})
        {'next_index': 'int', 'workers': 'list<int>'}
        >>> state_spec(np.zeros((2, 3), np.int32))
        'ndarray<int32>(2, 3)'
    """
    if isinstance(state, dict):
        return {key: state_spec(value) for key, value in state.items()}
    if isinstance(state, np.ndarray):
        return f"ndarray<{state.dtype}>{state.shape}"
    if isinstance(state, (list, tuple)):
        kinds = {type(item) for item in state}
        if len(kinds) <= 1:
            inner = next(iter(kinds)).__name__ if kinds else ""
            return f"{type(state).__name__}<{inner}>"
        return type(state)(state_spec(item) for item in state)
    return type(state).__name__


def _read(value: Any, max_elements: int) -> list[Any]:
    if isinstance(value, Dataset):
        return value.get_many(np.arange(min(value.length, max_elements), dtype=np.int64))
    return list(itertools.islice(iterate(value), max_elements))
