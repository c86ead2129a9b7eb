"""Random nested elements (dicts, lists, tuples of leaves) and an equality that sees key order.

The differential tests of key order (batches, Grain's worker processes) build
the same elements for Grain and for grainfn from a template, and compare what
each yields with `assert_same_tree`: the same keys in the same order at every
level, the same types, the same values.
"""

from __future__ import annotations

import collections
import itertools
import urllib.parse
from typing import Any

import numpy as np
from hypothesis import strategies as st

STRING_KEYS = ["a", "b", "B", "Z", "_x", "10", "9", "ab", "aa", "y", "z"]
"""Keys whose sorted order differs from most insertion orders (case, digits, prefixes)."""

LEAVES = ["int", "float", "array", "str", None]
"""What a leaf of a template becomes in each element (None stays None: an empty subtree)."""


def dict_of(values: st.SearchStrategy[Any], min_size: int) -> st.SearchStrategy[dict[Any, Any]]:
    """Dicts with all-string or all-int keys (Grain refuses keys that do not compare)."""
    keys = st.one_of(st.sampled_from(STRING_KEYS), st.integers(-3, 20))
    return keys.flatmap(
        lambda key: st.dictionaries(
            st.sampled_from(STRING_KEYS) if isinstance(key, str) else st.integers(-3, 20),
            values,
            min_size=min_size,
            max_size=5,
        )
    )


def templates() -> st.SearchStrategy[dict[Any, Any]]:
    """A top-level dict of leaf kinds nested in dicts, lists and tuples."""
    nested = st.recursive(
        st.sampled_from(LEAVES),
        lambda children: st.one_of(
            dict_of(children, min_size=0),
            st.lists(children, min_size=1, max_size=3),
            st.lists(children, min_size=1, max_size=3).map(tuple),
        ),
        max_leaves=12,
    )
    return dict_of(nested, min_size=1)


def element(template: Any, index: int, counter: itertools.count[int] | None = None) -> Any:
    """The element `index` of a template: every leaf a value of its kind unique to (index, leaf)."""
    counter = itertools.count() if counter is None else counter
    if isinstance(template, dict):
        return {key: element(value, index, counter) for key, value in template.items()}
    if isinstance(template, (list, tuple)):
        return type(template)(element(value, index, counter) for value in template)
    if template is None:
        return None
    value = 100 * index + next(counter)
    if template == "int":
        return value
    if template == "float":
        return value + 0.5
    if template == "array":
        return np.array([value, -value], dtype=np.int32)
    return f"s{value}"


def assert_same_tree(ours: Any, theirs: Any, path: str = "batch") -> None:
    """Equal trees whose dicts have the same keys in the same order, at every level."""
    if not isinstance(theirs, np.ndarray):
        assert type(ours) is type(theirs), f"{path}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, dict):
        assert list(ours.keys()) == list(theirs.keys()), f"{path}: key order differs"
        for key in theirs:
            assert_same_tree(ours[key], theirs[key], f"{path}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_tree(a, b, f"{path}[{i}]")
    elif isinstance(theirs, np.ndarray):  # Grain's workers hand out a subclass
        assert ours.dtype == theirs.dtype, f"{path}: {ours.dtype} != {theirs.dtype}"
        np.testing.assert_array_equal(ours, theirs, err_msg=path)
    else:
        assert ours == theirs, path


def assert_same_trees(ours: list[Any], theirs: list[Any]) -> None:
    """Lists of the same length whose trees are the same, element by element."""
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert_same_tree(a, b, f"element {k}")


def every_kind(i: int) -> Any:
    """Each kind of node Grain's workers rebuild, or keep, nested in a dict."""
    return {
        "nested": {"b": i, "a": [{"d": i, "c": (i, {"y": i, "x": None})}]},
        "ordered": collections.OrderedDict([("b", i), ("a", {"d": i, "c": i})]),
        "default": collections.defaultdict(int, {"b": i, "a": {"d": i, "c": i}}),
        "counter": collections.Counter({"b": i, "a": i}),  # a dict subclass: a leaf to JAX
        "url": urllib.parse.ParseResult("s", {"b": i, "a": i}, "p", "", "", ""),  # a namedtuple
        "numbers": {10: "ten", 9: "nine", -1: i},
        "text": f"t{i}",
        "array": np.arange(3) + i,
    }
