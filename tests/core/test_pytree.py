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
