"""Tests for grainfn._src.core.pytree.stack: structure errors, and strict stacking."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.core import pytree
from grainfn._src.loader.operations import stack_legacy
from grainfn._src.stages.batch import sorted_keys

leaves = st.one_of(st.integers(-5, 5), st.floats(-1, 1, allow_nan=False), st.text(max_size=2))
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.sampled_from("abc"), children, max_size=3),
    ),
    max_leaves=6,
)


@pytest.mark.parametrize(
    ("elements", "where"),
    [
        ([{"a": 1}, {"b": 2}], "at the top level: element 0 is a dict with keys ['a']"),
        ([[1, 2], [3]], "at the top level: element 0 is a list of length 2"),
        ([{"a": (1, 2)}, {"a": [1, 2]}], "at ['a']: element 0 is a tuple of length 2"),
        ([None, 1], "at the top level: element 0 is None"),
    ],
)
def test_structure_mismatch_is_a_structure_error_naming_the_path(
    elements: list[Any], where: str
) -> None:
    for strict in (False, True):
        with pytest.raises(pytree.StructureError) as error:
            pytree.stack(elements, strict=strict)
        assert isinstance(error.value, ValueError)
        assert where in str(error.value)
    with pytest.raises(TypeError) as legacy_error:
        stack_legacy(elements)
    assert str(legacy_error.value) == str(error.value)


def test_a_leaf_beside_a_subtree_is_stacked_unless_strict() -> None:
    elements = [{"x": 1}, {"x": {"y": 2}}]
    assert pytree.stack(elements)["x"].tolist() == [1, {"y": 2}]
    with pytest.raises(pytree.StructureError, match=r"at \['x'\]: element 0 is a leaf of type int"):
        pytree.stack(elements, strict=True)
    with pytest.raises(pytree.StructureError, match="element 2 is a list of length 1"):
        pytree.stack([1, 2, [3]], strict=True)
    with pytest.raises(TypeError, match="element 1 is None"):
        stack_legacy([1, None])


def test_leaf_shapes_stay_value_errors_in_both_modes() -> None:
    for strict in (False, True):
        with pytest.raises(ValueError, match=r"element 0 has shape \(2,\) but element 1 has"):
            pytree.stack([np.zeros(2), np.zeros(3)], strict=strict)
    with pytest.raises(ValueError, match="shape") as error:
        stack_legacy([np.zeros(2), np.zeros(3)])
    assert not isinstance(error.value, pytree.StructureError)


@given(tree=trees, count=st.integers(1, 4))
def test_strict_stacking_of_equal_structures_equals_stacking(tree: Any, count: int) -> None:
    elements = [tree] * count
    expected = pytree.stack(elements)
    assert repr(pytree.stack(elements, strict=True)) == repr(expected)
    assert repr(stack_legacy(elements)) == repr(sorted_keys(expected, tree))  # Grain's key order


STACKED_DTYPES = st.sampled_from(["uint8", "int16", "int32", "int64", "float32", "float64", "bool"])
VIEWS = st.sampled_from(["as is", "flip last but one", "flip first", "step", "transpose"])


def view_of(array: np.ndarray, how: str) -> np.ndarray:
    """A view of `array` of its shape (`transpose` keeps it square), strided as `how` says."""
    if how == "flip last but one":
        return array[..., ::-1, :]  # a flipped image: runs of the last axis, in reverse order
    if how == "flip first":
        return array[::-1]
    if how == "step":
        return np.repeat(array, 2, axis=-1)[..., ::2]  # no contiguous run at all
    if how == "transpose" and array.shape[-1] == array.shape[-2]:
        return np.swapaxes(array, -1, -2)
    return array


@given(
    st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(1, 5)),
    STACKED_DTYPES,
    st.lists(VIEWS, min_size=1, max_size=6),
)
def test_stack_arrays_is_np_stack(
    shape: tuple[int, int, int, int], dtype: str, views: list[str]
) -> None:
    size = int(np.prod(shape))
    arrays = [
        view_of((np.arange(size) * (k + 1) % 251).astype(dtype).reshape(shape), how)
        for k, how in enumerate(views)
    ]
    arrays = [a for a in arrays if a.shape == arrays[0].shape]
    got, expected = pytree.stack_arrays(arrays), np.stack(arrays)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected)
    assert got.strides == expected.strides  # numpy's memory order, F-ordered rows included
    # Into a region of a larger buffer, as a worker's columns are written into shared memory.
    buffer = np.zeros(expected.nbytes + 3, np.uint8)
    out = buffer[3:].view(expected.dtype) if expected.itemsize == 1 else np.empty_like(expected)
    out = out.reshape(expected.shape)
    assert pytree.stack_into(out, arrays) is out
    assert np.array_equal(out, expected)


def test_stack_of_other_dtypes_or_shapes_is_numpys() -> None:
    rows = np.arange(2048, dtype=np.int32).reshape(32, 64)
    mixed = [rows, rows.astype(np.int64)]
    assert pytree.stack_arrays(mixed).dtype == np.stack(mixed).dtype == np.int64
    with pytest.raises(ValueError, match="same shape"):
        pytree.stack_arrays([rows, rows[:, :10]])
