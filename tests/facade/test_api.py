"""The Grain API surface: iterators, flat_map, legacy names.

MapDataset and IterDataset themselves are tested in test_dataset.py; the experimental
classes and functions each in the test file of their facade module (test_limit.py, ...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

import grainfn
import grainfn as grain
import grainfn.python as legacy
from grainfn import fn


def test_iterator_state_round_trips_through_json_and_repeats_elements() -> None:
    ds = grain.MapDataset.range(40).seed(1).shuffle().to_iter_dataset().filter(lambda x: x % 3)
    ds = ds.batch(4)
    it = iter(ds)
    assert isinstance(it, grain.DatasetIterator)
    next(it)
    saved = json.loads(json.dumps(it.get_state()))
    rest = [b.tolist() for b in it]
    again = iter(ds)
    again.set_state(saved)
    assert [b.tolist() for b in again] == rest
    assert isinstance(it.core.state, fn.DatasetPosition)


def test_set_state_refuses_foreign_states_with_what_differs() -> None:
    it = iter(grain.MapDataset.range(10).shuffle(seed=1).to_iter_dataset())
    other = iter(grain.MapDataset.range(10).shuffle(seed=2).to_iter_dataset())
    with pytest.raises(ValueError, match=r"another pipeline: stage line 1 is 'shuffle\(seed=2\)"):
        it.set_state(other.get_state())
    with pytest.raises(ValueError, match=r"should hold 'next_index'.*another pipeline"):
        it.set_state({"index": 3})
    truncated = it.get_state()
    del truncated["state"]
    with pytest.raises(ValueError, match="truncated: key 'state' is missing"):
        it.set_state(truncated)
    corrupt = it.get_state()
    corrupt["state"]["position"] = "x"
    with pytest.raises(ValueError, match="position must be an integer"):
        it.set_state(corrupt)


def test_a_state_carries_over_between_read_options() -> None:
    ds = grain.MapDataset.range(100).map(lambda x: x * 2)
    threaded = iter(ds.to_iter_dataset(grain.ReadOptions(num_threads=4)))
    for _ in range(30):
        next(threaded)
    plain = iter(ds.to_iter_dataset(grain.ReadOptions(num_threads=0)))
    plain.set_state(threaded.get_state())
    assert list(plain) == list(range(60, 200, 2))


def test_close_and_context_manager() -> None:
    ds = grain.MapDataset.range(5).to_iter_dataset()
    with iter(ds) as it:
        assert next(it) == 0
        it.start_prefetch()
        assert next(it) == 1
    with pytest.raises(ValueError, match="iterator is closed"):
        next(it)
    assert it.get_state()["state"]["position"] == 2
    it.close()  # closing twice is fine
    it.set_state(it.get_state())  # and set_state reopens it
    assert list(it) == [2, 3, 4]


class Repeat(grain.transforms.FlatMap):
    max_fan_out = 3

    def flat_map(self, element: Any) -> Sequence[Any]:
        return [element] * (element % 4)


def test_flat_map_matches_grain() -> None:
    import grain as real

    class RealRepeat(real.experimental.FlatMapTransform):
        max_fan_out = 3

        def flat_map(self, element: Any) -> Sequence[Any]:
            return [element] * (element % 4)

    ours = grainfn.experimental.FlatMapMapDataset(grain.MapDataset.range(10), Repeat())
    theirs = real.experimental.FlatMapMapDataset(real.MapDataset.range(10), RealRepeat())
    assert len(ours) == len(theirs) == 30
    assert [ours[i] for i in range(60)] == [theirs[i] for i in range(60)]
    ours_it = grain.MapDataset.range(10).to_iter_dataset().apply(Repeat())
    theirs_it = real.experimental.FlatMapIterDataset(
        real.MapDataset.range(10).to_iter_dataset(real.ReadOptions(num_threads=0)), RealRepeat()
    )
    assert list(ours_it) == list(theirs_it)
    grainfn.experimental.assert_equal_output_after_checkpoint(ours_it)
    with pytest.raises(ValueError, match="into 4 parts, more than max_fan_out=3"):
        grain.MapDataset.range(5).flat_map(lambda x: [x] * 4, max_fan_out=3)[3]


def test_legacy_names_are_the_current_classes() -> None:
    assert grain.MapTransform is grain.transforms.Map is legacy.MapTransform
    assert grain.RandomMapTransform is grain.transforms.RandomMap
    assert grain.FilterTransform is grain.transforms.Filter
    assert grain.Batch is grain.transforms.Batch
    assert legacy.MapDataset is grain.MapDataset
    assert grain.experimental.FlatMapTransform is grain.transforms.FlatMap

    class Source(grain.RandomAccessDataSource[int]):
        def __len__(self) -> int:
            return 3

        def __getitem__(self, index: int) -> int:
            return index * 7

    assert isinstance(Source(), grain.sources.RandomAccessDataSource)
    assert isinstance([1, 2], grain.sources.RandomAccessDataSource)
    assert list(legacy.MapDataset.source(Source())) == [0, 7, 14]
    assert list(grain.MapDataset.source(grain.sources.RangeDataSource(1, 9, 3))) == [1, 4, 7]
