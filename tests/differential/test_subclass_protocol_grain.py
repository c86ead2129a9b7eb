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


def timed_plus_one(module: Any) -> Any:
    """A MapDataset subclass that times itself with Grain's recorders, as axlearn's do."""

    class PlusOne(module.MapDataset):  # type: ignore[name-defined,misc]
        def __init__(self, parent: Any) -> None:
            super().__init__(parent)

        def __len__(self) -> int:
            return len(self._parent)

        def __getitem__(self, index: Any) -> Any:
            element = self._parent[index]
            with self._stats.record_self_time(num_elements=1):
                return self._stats.record_output_spec(element + 1)

    class Doubled(module.DatasetIterator):  # type: ignore[name-defined,misc]
        def __init__(self, parent: Any) -> None:
            super().__init__(parent)

        def __next__(self) -> Any:
            element = next(self._parent)
            with self._stats.record_self_time():
                return element * 2

        def get_state(self) -> dict[str, Any]:
            return self._parent.get_state()

        def set_state(self, state: dict[str, Any]) -> None:
            self._parent.set_state(state)

    return PlusOne, Doubled


def test_subclasses_that_record_with_grains_stats_read_as_in_grain() -> None:
    def read(module: Any) -> tuple[list[int], list[int]]:
        plus_one, doubled = timed_plus_one(module)
        ds = plus_one(module.MapDataset.range(6).seed(1).shuffle())
        return list(ds), list(doubled(iter(ds.to_iter_dataset())))

    assert read(grainfn) == read(grain)
    assert sorted(read(grainfn)[0]) == [1, 2, 3, 4, 5, 6]
