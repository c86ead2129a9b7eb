"""`fn.batch(..., sort_keys=True)` and `sorted_keys`: JAX's dict key order on batches.

The core batch keeps the insertion order of each batch's first element; with
`sort_keys` (which the Grain API sets) its dicts come out in the order JAX's
pytree functions give them, checked here against `jax.tree_util` itself.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core import pytree
from grainfn._src.stages.batch import sorted_keys
from grainfn.testing import assert_elements_equal

KEYS = st.sampled_from(["a", "b", "B", "_", "10", "9", "ab", "z"])

trees = st.recursive(
    st.integers(0, 9),
    lambda children: st.one_of(
        st.dictionaries(KEYS, children, max_size=4),
        st.dictionaries(st.integers(-2, 5), children, max_size=3),
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3).map(tuple),
        st.dictionaries(KEYS, children, max_size=3).map(collections.OrderedDict),
    ),
    max_leaves=10,
)


def key_orders(tree: Any) -> Any:
    if isinstance(tree, dict):
        return [(key, key_orders(value)) for key, value in tree.items()]
    if isinstance(tree, (list, tuple)):
        return [key_orders(value) for value in tree]
    return None


@given(trees)
def test_sorted_keys_gives_jaxs_key_order(tree: Any) -> None:
    import jax

    elements = [tree, tree]
    ours = sorted_keys(pytree.stack(elements), tree)
    theirs = jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *elements)
    assert key_orders(ours) == key_orders(theirs)
    assert [leaf.tolist() for leaf in pytree.leaves(ours)] == [
        leaf.tolist() for leaf in jax.tree_util.tree_leaves(theirs)
    ]


DATA = [{"b": i, "a": {"z": i, "y": [i, {"d": i, "c": i}]}} for i in range(5)]


@pytest.mark.parametrize("as_stream", [False, True])
def test_the_batch_keeps_insertion_order_unless_asked(as_stream: bool) -> None:
    data = fn.from_dataset(fn.source(DATA)) if as_stream else fn.source(DATA)
    kept = next(fn.iterate(fn.batch(2, data)))
    assert list(kept) == ["b", "a"] and list(kept["a"]) == ["z", "y"]
    assert list(kept["a"]["y"][1]) == ["d", "c"]
    batched = fn.batch(2, data, sort_keys=True)
    for batch in list(fn.iterate(batched)):
        assert list(batch) == ["a", "b"] and list(batch["a"]) == ["y", "z"]
        assert list(batch["a"]["y"][1]) == ["c", "d"]
    expected = [pytree.stack(DATA[i : i + 2]) for i in range(0, 5, 2)]
    for k, (ours, theirs) in enumerate(zip(fn.iterate(batched), expected, strict=True)):
        assert_elements_equal(ours, theirs, f"batch {k}")


def test_map_level_reads_in_blocks_sort_every_batch() -> None:
    ds = fn.batch(2, fn.source(DATA), sort_keys=True)
    for batch in ds.get_many([0, 2, 1, 3, 0]):
        assert list(batch) == ["a", "b"] and list(batch["a"]) == ["y", "z"]
    numbers = fn.batch(2, fn.range(5), sort_keys=True)
    assert [b.tolist() for b in numbers.get_many([0, 1, 2])] == [[0, 1], [2, 3], [4]]


def test_the_option_is_in_the_description_only_when_set() -> None:
    stream = fn.from_dataset(fn.range(4))
    plain = fn.batch(2, stream, drop_remainder=True)
    assert plain.describe_stage() == "batch(2, drop_remainder=True)"
    saved = fn.state_to_dict(plain, plain.init())
    assert saved["pipeline"] == [
        "batch(2, drop_remainder=True)",
        "  from_dataset()",
        "    range(0, 4, 1)  [length 4]",
    ]
    sorting = fn.batch(2, stream, drop_remainder=True, sort_keys=True)
    assert sorting.describe_stage() == "batch(2, drop_remainder=True, sort_keys=True)"
    assert sorting != plain
    with pytest.raises(ValueError, match="State belongs to another pipeline"):
        fn.state_from_dict(sorting, saved)


def test_sort_keys_with_a_batch_fn_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"sort_keys=True and batch_fn=list.*Drop sort_keys"):
        fn.batch(2, fn.range(4), batch_fn=list, sort_keys=True)


def test_an_ordered_dict_keeps_its_order_and_keys_that_do_not_compare_keep_theirs() -> None:
    ordered = collections.OrderedDict([("b", 1), ("a", {"d": 2, "c": 3})])
    batch = fn.batch(2, fn.source([ordered] * 2), sort_keys=True).get(0)
    assert list(batch) == ["b", "a"] and list(batch["a"]) == ["c", "d"]
    mixed = fn.batch(2, fn.source([{"b": 1, 2: 3, "a": 4}] * 2), sort_keys=True).get(0)
    assert list(mixed) == ["b", 2, "a"]
