"""map and map_with_index: a function of each element (and its index), on datasets and streams."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn.testing import add_one, with_index

from support import conformance
from support.reading import read


def numbers(n: int) -> fn.Stream:
    return fn.from_dataset(fn.range(n))


def square(x: int) -> int:
    return x * x


def pair(i: int, x: Any) -> tuple[int, Any]:
    return i, x


def look_up(x: int, arrays: np.ndarray) -> int:
    return int(arrays[x])


def fail_at_one(i: int, x: int) -> int:
    if i == 1:
        raise KeyError("one")
    return x


# map.


def test_map_applies_the_function_to_every_element_of_every_epoch() -> None:
    ds = fn.map(square, fn.range(4))
    assert ds.get_many(range(6)) == [0, 1, 4, 9, 0, 1]
    assert [ds.get(i) for i in range(4)] == [0, 1, 4, 9]
    assert ds.describe_stage() == "map(square)"
    assert list(fn.iterate(fn.map(square, numbers(4)))) == [0, 1, 4, 9]


def test_map_passes_the_holes_a_filter_left_untouched() -> None:
    ds = fn.map(square, fn.filter(lambda x: x % 2 == 0, fn.range(4)))
    assert read(ds) == [0, None, 4, None]


def test_a_stream_map_keeps_its_parents_state() -> None:
    stream = fn.map(square, numbers(4))
    it = fn.iterate(stream)
    next(it)
    assert it.state == fn.DatasetPosition(1)
    assert list(fn.iterate(stream, it.state)) == [1, 4, 9]


def test_arrays_are_handed_to_the_function_beside_each_element() -> None:
    table = np.array([5, 6, 7])
    ds = fn.map(look_up, fn.range(3), arrays=table)
    assert read(ds) == [5, 6, 7]
    assert ds.describe_stage() == "map(look_up with arrays)"


# map_with_index.


def test_map_with_index_sees_the_position_of_every_epoch() -> None:
    ds = fn.map_with_index(lambda i, x: (i, x), fn.source("xy"))
    assert ds.get_many([0, 1, 2, 3]) == [(0, "x"), (1, "y"), (2, "x"), (3, "y")]


def test_a_stream_map_with_index_counts_the_elements_it_passes_on() -> None:
    assert list(fn.iterate(fn.map_with_index(lambda i, x: i * 100 + x, numbers(3)))) == [
        0,
        101,
        202,
    ]
    odd = fn.filter(lambda x: x % 2 == 1, numbers(6))
    assert list(fn.iterate(fn.map_with_index(pair, odd))) == [(0, 1), (1, 3), (2, 5)]


def test_a_count_state_resumes_from_a_dict() -> None:
    stream = fn.map_with_index(pair, numbers(4))
    it = fn.iterate(stream)
    next(it), next(it)
    assert it.state == fn.IndexedState(2, fn.DatasetPosition(2))
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == [(2, 2), (3, 3)]


def test_a_count_past_the_parents_state_is_refused_naming_the_field() -> None:
    stream = fn.map_with_index(pair, numbers(4))
    with pytest.raises(ValueError, match="State field seen is 3, but at most 1 fits the parent's"):
        stream.step(fn.IndexedState(3, fn.DatasetPosition(1)))


def test_an_error_of_the_function_names_the_element_of_the_stream() -> None:
    stream = fn.map_with_index(fail_at_one, numbers(4))
    with pytest.raises(KeyError, match="one") as raised:
        list(fn.iterate(stream))
    assert raised.value.__notes__ == [
        "Raised by the function of map_with_index(fail_at_one), reading element 1 of its stream."
    ]


test_conforms = conformance.conforms(
    conformance.Example("map(add_one)", lambda: fn.map(add_one, fn.range(7))),
    conformance.Example("map(add_one)", lambda: fn.map(add_one, conformance.numbers(7))),
    conformance.Example(
        "map_with_index(with_index)", lambda: fn.map_with_index(with_index, fn.range(5))
    ),
    conformance.Example(
        "map_with_index(with_index)", lambda: fn.map_with_index(with_index, conformance.numbers(5))
    ),
)


def test_a_state_saved_under_the_record_s_former_name_reads() -> None:
    stream = fn.map_with_index(lambda i, x: (i, x), fn.from_dataset(fn.range(4)))
    saved = fn.state_to_dict(stream, fn.IndexedState(2, fn.DatasetPosition(2)))
    saved["state"]["kind"] = "CountState"  # as grainfn wrote it before the record was renamed
    state = fn.state_from_dict(stream, saved)
    assert state == fn.IndexedState(2, fn.DatasetPosition(2))
    assert list(fn.iterate(stream, state)) == [(2, 2), (3, 3)]
