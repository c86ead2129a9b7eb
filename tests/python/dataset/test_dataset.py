"""Tests for grainfn._src.python.dataset.dataset.

Grain's internal dataset path (axlearn), against Grain 0.2.18.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


class Proportional:
    """axlearn's proportional slice: positions [start, end) of every `period`, as a subclass."""

    @staticmethod
    def of(base: type) -> Any:
        class ProportionalSlice(base):  # type: ignore[misc, valid-type]
            def __init__(self, parent: Any, *, start: int, end: int, period: int) -> None:
                super().__init__(parent)
                self._start, self._end, self._period = start, end, period
                full, rest = divmod(len(parent), period)
                self._length = full * (end - start) + min(rest, end) - min(rest, start)

            def __len__(self) -> int:
                return self._length

            def __getitem__(self, index: Any) -> Any:
                index %= len(self)
                width = self._end - self._start
                return self._parent[self._start + index // width * self._period + index % width]

        return ProportionalSlice


def test_dataset_module_subclasses_as_axlearn_does() -> None:
    from grain._src.python.dataset import dataset as theirs

    from grainfn._src.python.dataset import dataset as ours

    assert (ours.MapDataset, ours.IterDataset, ours.DatasetIterator) == (
        grainfn.MapDataset,
        grainfn.IterDataset,
        grainfn.DatasetIterator,
    )
    assert ours.MapDataset[int] is not None  # axlearn subclasses dataset.MapDataset[_T]

    def run(module: Any) -> list[int]:
        sliced = Proportional.of(module.MapDataset)(
            module.MapDataset.range(23), start=1, end=3, period=5
        )
        return [int(x) for x in sliced.shuffle(seed=4).to_iter_dataset()]

    assert run(ours) == run(theirs)
