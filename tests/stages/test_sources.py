"""Leaf datasets: fn.range against Python's range, fn.source over sequences, sources and arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn

from support import conformance
from support.reading import read

# fn.range.


@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-4, 4).filter(bool))
def test_range_matches_python_range(start: int, stop: int, step: int) -> None:
    ds = fn.range(start, stop, step)
    assert ds.length == len(range(start, stop, step))
    assert read(ds) == list(range(start, stop, step))


def test_range_repeats_every_epoch_and_names_its_bounds() -> None:
    ds = fn.range(5, 0, -2)
    assert ds.get_many(range(7)) == [5, 3, 1, 5, 3, 1, 5]
    assert ds.describe_stage() == "range(5, 0, -2)"
    assert fn.range(4) == fn.range(0, 4, 1)


def test_a_range_past_64_bits_reads_exact_python_ints() -> None:
    ds = fn.range(2**70, 2**70 + 3)
    assert ds.get_many(range(4)) == [2**70, 2**70 + 1, 2**70 + 2, 2**70]
    assert ds.get(2) == 2**70 + 2


def test_bad_range_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"stop must be an integer, got 1\.5 of type float"):
        fn.range(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"has 18446744073709551616 elements; a dataset has at"):
        fn.range(-(2**63), 2**63)


# fn.source over sequences and random-access sources.


class Tens:
    """A source of 4 records, `10 * i`, that reads blocks with `__getitems__`."""

    def __init__(self) -> None:
        self.blocks: list[list[int]] = []

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        return 10 * index

    def __getitems__(self, indices: list[int]) -> list[int]:
        self.blocks.append(list(indices))
        return [10 * i for i in indices]


def test_a_source_wraps_around_each_epoch() -> None:
    ds = fn.source("abc")
    assert ds.length == 3
    assert ds.get_many(range(7)) == ["a", "b", "c", "a", "b", "c", "a"]
    assert ds.get(4) == "b"
    assert ds.describe_stage() == "source(str, length 3)"


def test_a_block_read_calls_getitems_once_with_positions_inside_the_source() -> None:
    tens = Tens()
    ds = fn.source(tens)
    assert ds.get_many([3, 0, 5]) == [30, 0, 10]
    assert tens.blocks == [[3, 0, 1]]
    assert ds.get(6) == 20  # one position: __getitem__
    assert tens.blocks == [[3, 0, 1]]


def test_a_numpy_source_hands_out_its_rows() -> None:
    ds = fn.source(np.arange(6).reshape(3, 2))
    rows = ds.get_many([0, 4])
    assert [row.tolist() for row in rows] == [[0, 1], [2, 3]]


# fn.source over a dict of arrays: a source of rows, read like any other source.


def test_a_dict_of_arrays_is_a_source_of_rows_through_every_reader() -> None:
    images = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    data = {"image": images, "meta": {"label": np.arange(6) % 2, "id": np.arange(6) * 10}}
    ds = fn.shuffle(fn.source(data), seed=3)
    order = fn.shuffle(fn.range(6), seed=3).get_many(range(6))
    for row, i in zip(ds.get_many(range(6)), order):
        np.testing.assert_array_equal(row["image"], images[i])
        assert row["meta"] == {"label": i % 2, "id": i * 10}
    batch = next(fn.iterate(fn.batch(3, fn.from_dataset(ds))))
    np.testing.assert_array_equal(batch["image"], images[order[:3]])
    assert "arrays {'image': '(6, 2, 2) float32'" in repr(ds)


def test_arrays_of_different_lengths_are_refused_naming_their_shapes() -> None:
    with pytest.raises(ValueError, match=r"same first dimension.*'y': \(4,\)"):
        fn.source({"x": np.zeros(3), "y": np.zeros(4)})


def test_other_dicts_stay_sources_by_key() -> None:
    by_position = {0: "a", 1: "b"}  # a dict is a source of its values by key, as before
    assert fn.source(by_position).get_many([0, 1, 2]) == ["a", "b", "a"]
    assert fn.source({"x": [1, 2]}).length == 1  # a list is not an array


test_conforms = conformance.conforms(
    conformance.Example("range(2, 9, 1)", lambda: fn.range(2, 9)),
    conformance.Example("source(str, length 5)", lambda: fn.source("abcde")),
    conformance.Example("from_dataset()", lambda: conformance.numbers(7)),
)
