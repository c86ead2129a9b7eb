"""The functional API as a whole: block and single reads, currying, values, errors.

Each stage's own tests are in tests/stages/test_<stage>.py; the properties every
stage keeps are checked for all of them in tests/stages/test_conformance.py.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import toolz
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn
from grainfn.testing import add_one, build_dataset, dataset_specs

from support.reading import read

# Scalar and block paths, currying, values.


@given(dataset_specs(), st.lists(st.integers(0, 200), min_size=1, max_size=30))
def test_scalar_and_block_paths_agree(spec, positions) -> None:
    try:
        ds = build_dataset(spec)
    except (ValueError, TypeError):
        return
    if ds.length == 0:
        return
    try:
        block = ds.get_many(positions)
    except OverflowError:
        return
    except ValueError:  # e.g. ragged batches: some single read must fail the same way
        failures = 0
        for position in positions:
            try:
                ds.get(position)
            except ValueError:
                failures += 1
        assert failures > 0
        return
    for position, element in zip(positions, block):
        single = ds.get(position)
        if isinstance(element, np.ndarray):
            np.testing.assert_array_equal(single, element)
        else:
            assert single == element


def test_curried_forms_compose_with_toolz() -> None:
    piped = toolz.pipe(fn.range(10), fn.seed(1), fn.shuffle(), fn.map(add_one), fn.batch(3))
    direct = fn.batch(3, fn.map(add_one, fn.shuffle(fn.seed(1, fn.range(10)))))
    assert piped == direct
    assert [b.tolist() for b in read(piped)] == [b.tolist() for b in read(direct)]
    assert fn.shuffle(seed=3)(fn.range(4)) == fn.shuffle(fn.range(4), seed=3)


def test_datasets_are_immutable_values_with_readable_repr() -> None:
    ds = fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=3)))
    assert ds == fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=3)))
    assert ds != fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=4)))
    with pytest.raises(AttributeError):
        ds.length = 3  # type: ignore[misc]
    assert repr(ds).splitlines() == [
        "batch(4)  [length 3]",
        "  map(add_one)  [length 10]",
        "    shuffle(seed=3)  [length 10]",
        "      range(0, 10, 1)  [length 10]",
    ]
    assert pickle.loads(pickle.dumps(ds)) == ds


def test_elements_reads_any_window_of_positions() -> None:
    ds = fn.range(5)
    assert list(fn.elements(ds, start=3, stop=8)) == [3, 4, 0, 1, 2]
    assert list(fn.elements(ds, stop=0)) == []
    assert list(fn.elements(fn.range(5000))) == list(range(5000))


# Bad input: every message names the value and what is allowed.


def test_bad_arguments_are_refused_with_clear_messages() -> None:
    ds = fn.range(5)
    cases = [
        (lambda: fn.slice(slice(None, None, 0), ds), ValueError, "step must not be 0"),
        (lambda: fn.batch(0, ds), ValueError, "batch_size must be a positive integer, got 0"),
        (lambda: fn.batch(-3, ds), ValueError, "got -3"),
        (lambda: fn.repeat(None, fn.repeat(None, ds)), ValueError, "Cannot repeat an infinite"),
        (lambda: fn.repeat(0, ds), ValueError, "num_epochs must be a positive integer, got 0"),
        (
            lambda: fn.mix([ds, fn.source([])]),
            ValueError,
            "empty dataset: the dataset at position 1",
        ),
        (lambda: fn.map(3, ds), TypeError, "map fn must be callable, got 3"),
        (lambda: fn.filter("x", ds), TypeError, "filter predicate must be callable"),
        (lambda: fn.random_map(None, ds, seed=1), TypeError, "random_map fn must be callable"),
        (lambda: fn.shuffle(ds), ValueError, r"shuffle needs a seed.*fn.seed"),
        (lambda: fn.random_map(add_one, ds), ValueError, "random_map needs a seed"),
        (lambda: fn.batch(2, fn.filter(bool, ds)), ValueError, r"cannot follow filter\(bool\)"),
        (lambda: fn.map(add_one, [1, 2]), TypeError, "expects a grainfn Dataset"),
        (lambda: fn.concatenate([fn.repeat(None, ds)]), ValueError, "infinite dataset"),
        (lambda: fn.range(0, 5, 0), ValueError, "range step must not be 0"),
        (lambda: fn.source(5), TypeError, "must support len"),
        (lambda: fn.slice([9], ds), IndexError, "slice position 9 is out of range"),
        (
            lambda: fn.mix([]),
            ValueError,
            r"mix takes a non-empty list of datasets or streams, got \[\]",
        ),
    ]
    for build, error, match in cases:
        with pytest.raises(error, match=match):
            build()


def test_bad_indices_are_refused() -> None:
    with pytest.raises(IndexError, match="index must be >= 0, got -1"):
        fn.range(3).get(-1)
    with pytest.raises(IndexError, match="empty dataset"):
        fn.source([]).get(0)
    with pytest.raises(TypeError, match="index must be an integer"):
        fn.range(3).get(1.0)  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="indices must be >= 0"):
        fn.range(3).get_many([1, -2])
    with pytest.raises(OverflowError, match="past the last addressable position"):
        fn.slice([0], fn.repeat(None, fn.range(3))).get(1)
