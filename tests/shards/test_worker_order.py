"""Grain's worker order: each element as Grain's workers hand it over (`worker_copy`)."""

from __future__ import annotations

from typing import Any

import jax
from hypothesis import given, settings

from grainfn._src.shards.worker_order import worker_copy

from support.trees import assert_same_trees, element, every_kind, templates


@jax.tree_util.register_pytree_node_class
class Pair:
    """A class JAX registers as a node: its children's dicts are rebuilt too."""

    def __init__(self, left: Any, right: Any) -> None:
        self.left, self.right = left, right

    def tree_flatten(self) -> tuple[tuple[Any, Any], None]:
        return (self.left, self.right), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> Pair:
        return cls(*children)


@settings(max_examples=40)
@given(templates())
def test_worker_copy_is_jaxs_tree_map(template: Any) -> None:
    value = element(template, 3)
    nodes = {"pair": Pair(value, {"b": 1, "a": 2}), "all": every_kind(1), "value": value}
    copied = worker_copy(nodes)
    expected = jax.tree_util.tree_map(lambda leaf: leaf, nodes)
    pairs = copied.pop("pair"), expected.pop("pair")
    assert_same_trees([copied, pairs[0].left, pairs[0].right], [expected, *vars(pairs[1]).values()])
    assert type(pairs[0]) is Pair
