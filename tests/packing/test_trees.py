"""Tests for grainfn._src.packing.trees: leaves in JAX's order, paths, rebuilding, checking."""

from collections import namedtuple

import pytest

from grainfn._src.packing import trees

Pair = namedtuple("Pair", ["first", "second"])


def test_where_writes_a_path_as_subscripts() -> None:
    assert trees.where(()) == ""
    assert trees.where(("inputs", 0, "x")) == "['inputs'][0]['x']"


def test_leaf_paths_sort_dict_keys_and_keep_sequences_in_order() -> None:
    structure = {"b": [5, 6], "a": Pair(1, {"z": 2, "y": 3})}
    assert trees.leaf_paths(structure, ("root",)) == [
        (("root", "a", 0), 1),
        (("root", "a", 1, "y"), 3),
        (("root", "a", 1, "z"), 2),
        (("root", "b", 0), 5),
        (("root", "b", 1), 6),
    ]
    assert trees.leaf_paths(7) == [((), 7)]
    assert trees.leaf_paths({}) == []


def test_leaf_paths_name_dicts_whose_keys_cannot_be_sorted() -> None:
    message = r"padding_struct\['t'\] has keys that cannot be sorted, \[1, '1'\]; use keys of one"
    with pytest.raises(TypeError, match=message):
        trees.leaf_paths({"t": {1: 5, "1": 5}}, what="padding_struct")


def test_positive_leaves_check_every_leaf() -> None:
    assert trees.positive_leaves([3, {"x": 1}], ("a",), "") == [(("a", 0), 3), (("a", 1, "x"), 1)]
    with pytest.raises(ValueError, match=r"length_struct\['a'\]\[1\] must be a positive integer"):
        trees.positive_leaves([3, 0], ("a",), "")
    with pytest.raises(TypeError, match=r"\['a'\]\[0\] must be a positive int, got 'x'.*; ints"):
        trees.positive_leaves(["x"], ("a",), "ints")


def test_rebuild_keeps_the_structure_and_sorts_dict_keys() -> None:
    rebuilt = trees.rebuild({"y": Pair(0, 0), "x": (0, [0])}, iter(range(4)))
    assert rebuilt == {"x": (0, [1]), "y": Pair(2, 3)}
    assert list(rebuilt) == ["x", "y"]
    assert type(rebuilt["y"]) is Pair and type(rebuilt["x"]) is tuple


def test_rebuild_of_leaf_paths_is_the_tree() -> None:
    structure = {"b": [5, (6, 7)], "a": {"z": 2, "y": 3}}
    leaves = [leaf for _, leaf in trees.leaf_paths(structure)]
    assert trees.rebuild(structure, iter(leaves)) == structure


def test_collect_reads_leaves_in_order_and_leaves_out_other_keys_unless_exact() -> None:
    found: list[object] = []
    trees.collect({"x": 0, "y": (0, 0)}, {"y": [1, 2], "x": 3, "z": 4}, (), found, exact=False)
    assert found == [3, 1, 2]
    message = r"at element\['a'\] expected a dict with keys \['x', 'y'\], got a dict with keys"
    with pytest.raises(ValueError, match=message):
        trees.collect({"x": 0, "y": 0}, {"y": 1, "x": 3, "z": 4}, ("a",), [])


@pytest.mark.parametrize(
    ("structure", "element", "expected"),
    [
        ({"x": 0}, None, r"at element\['a'\] expected a dict with keys \['x'\], got None"),
        ({"x": 0}, {"y": 1}, r"expected a dict with keys \['x'\], got a dict with keys \['y'\]"),
        ((0, 0), [1], r"expected a sequence of 2, got \[1\] \(list\)"),
        (0, {"x": 1}, r"expected an array, got a dict with keys \['x'\]"),
        (0, None, r"expected an array, got None"),
    ],
)
def test_mismatches_name_the_path_and_what_was_expected(
    structure: object, element: object, expected: str
) -> None:
    with pytest.raises(ValueError, match=r"^Elements must have the structure of length_struct"):
        trees.collect(structure, element, ("a",), [])
    with pytest.raises(ValueError, match=expected):
        trees.collect(structure, element, ("a",), [])
