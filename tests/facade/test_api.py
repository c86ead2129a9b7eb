"""The Grain API surface: iterators, transforms, errors, repr, subclasses and legacy names."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
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


def test_indexing_follows_grain_and_python() -> None:
    ds = grain.MapDataset.range(2, 12, 2)
    assert (ds[0], ds[-1], ds[len(ds) + 1]) == (2, 10, 4)
    assert list(ds[1:4]) == [4, 6, 8]
    assert list(ds[::-2]) == [10, 6, 2]
    assert list(ds.slice(slice(1, None, 2))) == [4, 8]
    with pytest.raises(IndexError, match="index -6 is out of range for a dataset of length 5"):
        ds[-6]
    with pytest.raises(TypeError, match="index must be an integer"):
        ds[1.5]


def test_repr_shows_the_pipeline_one_line_per_stage() -> None:
    ds = grain.MapDataset.range(10).seed(4).shuffle().map(str).batch(2)
    assert repr(ds).splitlines() == [
        "MapDataset:",
        "  batch(2, sort_keys=True)  [length 5]",
        "    map(str)  [length 10]",
        f"      shuffle(seed={ds.core.parent.parent.seed})  [length 10]",
        "        seed(4)  [length 10]",
        "          range(0, 10, 1)  [length 10]",
    ]
    stream = ds.to_iter_dataset().filter(bool)
    assert repr(stream).splitlines()[:3] == [
        "IterDataset:",
        "  filter(bool)",
        "    from_dataset()",
    ]


def test_errors_grain_users_meet_are_clear() -> None:
    with pytest.raises(ValueError, match=r"cannot follow filter.*to_iter_dataset\(\).batch"):
        grain.MapDataset.range(5).filter(lambda x: x > 1).batch(2)
    with pytest.raises(ValueError, match=r"shuffle needs a seed.*ds.seed\(s\)"):
        grain.MapDataset.range(5).shuffle()
    ragged = grain.MapDataset.source([{"x": np.zeros(2)}, {"x": np.zeros(3)}]).batch(2)
    with pytest.raises(ValueError, match=r"leaf \['x'\]: element 0 has shape \(2,\).*\(3,\)"):
        ragged[0]
    keys = grain.MapDataset.source([{"x": 1}, {"y": 1}]).batch(2)
    with pytest.raises(ValueError, match=r"different structure.*keys \['x'\].*keys \['y'\]"):
        keys[0]
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\), got -1"):
        grain.MapDataset.range(5).shuffle(seed=-1)
    with pytest.raises(ValueError, match="num_threads must be an integer >= 0, got -1"):
        grain.ReadOptions(num_threads=-1)
    with pytest.raises(TypeError, match=r"read_options must be a grainfn\.ReadOptions"):
        grain.MapDataset.range(3).to_iter_dataset({"num_threads": 0})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"MapDataset\.mix takes MapDatasets"):
        grain.MapDataset.mix([grain.MapDataset.range(3).to_iter_dataset()])  # type: ignore[list-item]


@dataclasses.dataclass
class AddOne(grain.transforms.Map):
    amount: int = 1

    def map(self, element: Any) -> Any:
        return element + self.amount


class Jitter(grain.transforms.RandomMap):
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return element + int(rng.integers(100))


class IsEven(grain.transforms.Filter):
    def filter(self, element: Any) -> bool:
        return element % 2 == 0


class Tag(grain.transforms.MapWithIndex):
    def map_with_index(self, index: int, element: Any) -> Any:
        return (index, element)


class Repeat(grain.transforms.FlatMap):
    max_fan_out = 3

    def flat_map(self, element: Any) -> Sequence[Any]:
        return [element] * (element % 4)


def test_transform_objects_dispatch_to_their_methods() -> None:
    ds = grain.MapDataset.range(8)
    assert list(ds.map(AddOne(2))) == list(range(2, 10))
    assert list(ds.filter(IsEven())) == [0, 2, 4, 6]
    assert list(ds.map_with_index(Tag()))[:2] == [(0, 0), (1, 1)]
    assert list(ds.random_map(Jitter(), seed=1)) == list(ds.random_map(Jitter(), seed=1))


def test_apply_matches_the_methods_and_refuses_a_batch_after_a_filter() -> None:
    ds = grain.MapDataset.range(8).seed(3)
    add, jitter = AddOne(), Jitter()  # bound methods are equal when their objects are the same
    applied = ds.apply([add, jitter, grain.transforms.Batch(2)])
    manual = ds.map(add).random_map(jitter).batch(2)
    assert applied.core == manual.core
    assert ds.apply(add).core == ds.map(add).core
    with pytest.raises(ValueError, match="cannot follow filter"):
        ds.apply([IsEven(), grain.transforms.Batch(2)])
    stream = ds.to_iter_dataset().apply([IsEven(), grain.transforms.Batch(2)])
    assert [b.tolist() for b in stream] == [[0, 2], [4, 6]]
    with pytest.raises(TypeError, match="apply takes Map, RandomMap"):
        ds.apply([lambda x: x])


def test_a_transform_of_the_wrong_kind_names_the_right_method() -> None:
    with pytest.raises(TypeError, match=r"filter got a Map transformation \(AddOne\)"):
        grain.MapDataset.range(3).filter(AddOne())
    with pytest.raises(TypeError, match=r"map got a RandomMap transformation.*\.random_map"):
        grain.MapDataset.range(3).map(Jitter())
    with pytest.raises(TypeError, match="map takes a Map transformation or a callable, got 3"):
        grain.MapDataset.range(3).map(3)


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


def test_experimental_names_match_grain() -> None:
    import grain as real

    assert list(
        grainfn.experimental.LimitIterDataset(grain.MapDataset.range(9).to_iter_dataset(), 4)
    ) == [0, 1, 2, 3]
    repeated = grainfn.experimental.RepeatIterDataset(
        grain.MapDataset.range(3).to_iter_dataset(), num_epochs=2
    )
    assert list(repeated) == [0, 1, 2, 0, 1, 2]
    # Not 2**k with even k >= 16: there Grain's block is a bit short (see docs/functional.md).
    for max_index in (0, 9, 1000, 2**20 + 4):
        for index in (0, max_index // 2, max_index):
            assert grainfn.experimental.index_shuffle(
                index, max_index=max_index, seed=11, rounds=4
            ) == real.experimental.index_shuffle(index, max_index=max_index, seed=11, rounds=4)
        assert grainfn.experimental.index_shuffle(
            max_index, max_index=max_index, seed=11, rounds=8
        ) == real.experimental.index_shuffle(max_index, max_index=max_index, seed=11, rounds=8)
    with pytest.raises(ValueError, match="rounds=7"):
        grainfn.experimental.index_shuffle(1, max_index=9, seed=1, rounds=7)


class Doubled(grain.MapDataset):
    """A dataset class written against Grain's protocol."""

    def __init__(self, parent: grain.MapDataset) -> None:
        super().__init__(parent)

    def __len__(self) -> int:
        return 2 * len(self._parent)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.slice(index)
        return self._parent[index // 2]


def test_grain_style_subclasses_join_pipelines() -> None:
    ds = Doubled(grain.MapDataset.range(3)).map(lambda x: x * 10)
    assert list(ds) == [0, 0, 10, 10, 20, 20]
    assert ds.parents[0].__class__ is Doubled
    assert list(Doubled(grain.MapDataset.range(2))[1:3]) == [0, 1]
    assert "Doubled  [length 6]" in repr(ds)
    seeded = Doubled(grain.MapDataset.range(4).seed(5)).shuffle()
    assert sorted(seeded) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_iter_dataset_mix_takes_lists_and_dicts_and_map_datasets() -> None:
    a, b = grain.MapDataset.range(4), grain.MapDataset.range(10, 14).to_iter_dataset()
    assert list(grain.IterDataset.mix([a, b])) == [0, 10, 1, 11, 2, 12, 3, 13]
    named = grain.IterDataset.mix({"b": b, "a": a.to_iter_dataset()}, weights={"a": 3, "b": 1})
    listed = grain.IterDataset.mix({"b": b, "a": a.to_iter_dataset()}, weights=[1, 3])
    assert list(named) == list(listed)
    with pytest.raises(TypeError, match=r"IterDataset\.mix takes IterDatasets or MapDatasets"):
        grain.IterDataset.mix([[1, 2]])


def test_mp_prefetch_keeps_elements_and_prefetch_is_deprecated() -> None:
    ds = grain.MapDataset.range(20).map(lambda x: x + 1).to_iter_dataset()
    fetched = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    assert list(fetched) == list(ds)
    with pytest.warns(DeprecationWarning, match="use mp_prefetch"):
        old = ds.prefetch(grain.MultiprocessingOptions(num_workers=2))
    assert list(old) == list(ds)
    with pytest.raises(TypeError, match=r"mp_prefetch takes a grainfn\.MultiprocessingOptions"):
        ds.mp_prefetch(2)  # type: ignore[arg-type]


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


def test_pipe_passes_the_dataset_first() -> None:
    def add(ds: Any, amount: int) -> Any:
        return ds.map(lambda x: x + amount)

    assert list(grain.MapDataset.range(3).pipe(add, amount=5)) == [5, 6, 7]
    assert list(grain.MapDataset.range(3).to_iter_dataset().pipe(add, 1)) == [1, 2, 3]


def test_mp_prefetch_takes_sequential_slice_and_its_output_stays_that_of_no_workers() -> None:
    ds = grain.MapDataset.range(30).seed(1).shuffle().to_iter_dataset().filter(lambda x: x % 4)
    options = grain.MultiprocessingOptions(num_workers=2)
    assert list(ds.mp_prefetch(options, sequential_slice=True)) == list(ds)
