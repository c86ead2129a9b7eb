"""with_parents: a stage rebuilt to read other parents, or None where it cannot be."""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn import fn
from grainfn._src.core.rebuild import with_parents


def test_a_stage_with_one_parent_reads_the_new_one() -> None:
    mapped = fn.map(str, fn.range(3))
    rebuilt = with_parents(mapped, (fn.range(5),))
    assert rebuilt.length == 5 and rebuilt.fn is str
    assert mapped.length == 3  # the original is unchanged
    stream = fn.batch(2, fn.from_dataset(fn.range(4)))
    other = fn.from_dataset(fn.range(6))
    assert [b.tolist() for b in fn.iterate(with_parents(stream, (other,)))][-1] == [4, 5]


def test_a_stage_with_a_tuple_of_parents_reads_the_new_tuple() -> None:
    mixed = fn.concatenate([fn.range(2), fn.range(3)])
    rebuilt = with_parents(mixed, (fn.range(10, 12), fn.range(20, 21)))
    assert [rebuilt.get(i) for i in range(rebuilt.length)] == [10, 11, 20]


def test_a_leaf_is_itself() -> None:
    leaf = fn.range(3)
    assert with_parents(leaf, ()) is leaf


@dataclasses.dataclass(frozen=True)
class Hidden:
    """A node that keeps its parent in a list: not a field a rebuild can replace."""

    held: list[Any]

    @property
    def parents(self) -> tuple[Any, ...]:
        return tuple(self.held)


class NotADataclass:
    parents = (fn.range(2),)


def test_a_stage_keeping_its_parents_elsewhere_cannot_be_rebuilt() -> None:
    assert with_parents(Hidden([fn.range(2)]), (fn.range(3),)) is None
    assert with_parents(NotADataclass(), (fn.range(3),)) is None
