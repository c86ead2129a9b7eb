"""Grain's subclassing protocol, as published code uses it, against Grain 0.2.18.

MaxText's `IndexShardIterDataset` calls `super().__init__(parent)` and then
reads `self._parent`; its iterator does the same with the parent iterator.
The same classes, written once over either module, give the same elements,
and each library's state restores its own continuation.
"""

from __future__ import annotations

from typing import Any

import grain
import pytest

import grainfn

pytestmark = pytest.mark.grain


def every_other(module: Any) -> Any:
    """An IterDataset that keeps every other element of its parent, as a user writes it."""

    class EveryOtherIterator(module.DatasetIterator):  # type: ignore[name-defined,misc]
        def __init__(self, parent: Any) -> None:
            super().__init__(parent)
            self._count = 0

        def __next__(self) -> Any:
            while True:
                element = next(self._parent)
                self._count += 1
                if self._count % 2:
                    return element

        def get_state(self) -> dict[str, Any]:
            return {"parent": self._parent.get_state(), "count": self._count}

        def set_state(self, state: dict[str, Any]) -> None:
            self._parent.set_state(state["parent"])
            self._count = state["count"]

    class EveryOther(module.IterDataset):  # type: ignore[name-defined,misc]
        def __init__(self, parent: Any) -> None:
            super().__init__(parent)

        def __iter__(self) -> Any:
            return EveryOtherIterator(self._parent.__iter__())

    return EveryOther


def pipeline(module: Any) -> Any:
    parent = module.MapDataset.range(20).seed(3).shuffle().to_iter_dataset()
    return every_other(module)(parent).batch(3)


def lists(batches: Any) -> list[list[int]]:
    return [batch.tolist() for batch in batches]


@pytest.mark.parametrize("taken", [0, 1, 3])
def test_a_subclass_that_reads_self_parent_gives_grains_elements_and_resumes(taken: int) -> None:
    runs = []
    for module in (grain, grainfn):
        it = iter(pipeline(module))
        first = lists(next(it) for _ in range(taken))
        state = it.get_state()
        rest = lists(it)
        resumed = iter(pipeline(module))
        resumed.set_state(state)
        assert lists(resumed) == rest  # each library's state continues its own run
        runs.append(first + rest)
    assert runs[1] == runs[0]


def test_parent_of_a_subclass_is_the_dataset_it_was_given() -> None:
    for module in (grain, grainfn):
        parent = module.MapDataset.range(4).to_iter_dataset()
        ds = every_other(module)(parent)
        assert ds._parent is parent
        assert list(ds._parents) == [parent]
