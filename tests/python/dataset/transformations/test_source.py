"""Tests for grainfn._src.python.dataset.transformations.source.

Grain's source datasets path (axlearn), against Grain 0.2.18.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def fake_source(module: Any, examples: list[Any], *, repeat: int, seed: int | None) -> Any:
    """axlearn's `fake_grain_source` (input_fake.py): examples as a seeded, shuffled source."""
    ds = module.SourceMapDataset(examples)
    if seed is not None:
        ds = ds.seed(seed)
        ds = ds.shuffle()
    return ds.repeat(num_epochs=repeat)


def test_source_module_builds_axlearns_fake_sources() -> None:
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    examples = [{"text": i, "ids": [i, i + 1]} for i in range(7)]
    for repeat, seed in [(1, None), (2, None), (3, 123), (1, 5)]:
        mine = list(fake_source(ours, examples, repeat=repeat, seed=seed))
        assert mine == list(fake_source(theirs, examples, repeat=repeat, seed=seed))
        assert len(mine) == 7 * repeat
    mine = fake_source(ours, examples, repeat=2, seed=123)
    assert isinstance(mine, grainfn.MapDataset) and mine[3] == examples[mine[3]["text"]]
    assert issubclass(ours.SourceMapDataset, grainfn.MapDataset)


def test_source_module_ranges_are_grains() -> None:
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    for args in [(12,), (2, 12), (2, 12, 3), (10, 0, -4)]:
        assert list(ours.RangeMapDataset(*args)) == list(theirs.RangeMapDataset(*args))
        assert len(ours.RangeMapDataset(*args)) == len(theirs.RangeMapDataset(*args))

    def observations(module: Any) -> list[Any]:  # as Grain's own packing tests build them
        ds = module.RangeMapDataset(1, 7).repeat()
        ds = ds.map_with_index(lambda index, value: (index + 1, [value] * value))
        return list(ds[:9].to_iter_dataset())

    assert observations(ours) == observations(theirs)


def test_a_source_subclass_reads_its_source_as_in_grain() -> None:
    import grain
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    def episodes(library: Any, module: Any) -> list[Any]:
        """A subclass that reads runs of steps of its source (`self._source`) per episode."""

        class Episodes(module.SourceMapDataset):
            def __init__(self, steps: Any, lengths: list[int]) -> None:
                super().__init__(steps)
                self._starts = [sum(lengths[:i]) for i in range(len(lengths))]
                self._lengths = lengths

            def __len__(self) -> int:
                return len(self._lengths)

            def __getitem__(self, index: Any) -> Any:
                if isinstance(index, slice):
                    return self.slice(index)
                start = self._starts[index % len(self)]
                return [self._source[start + j] for j in range(self._lengths[index % len(self)])]

        steps = library.MapDataset.range(10).map(lambda x: x * 10)
        return list(Episodes(steps, [3, 1, 4, 2]).shuffle(seed=2).to_iter_dataset())

    mine = episodes(grainfn, ours)
    assert mine == episodes(grain, theirs)
    assert sorted(mine) == [[0, 10, 20], [30], [40, 50, 60, 70], [80, 90]]
