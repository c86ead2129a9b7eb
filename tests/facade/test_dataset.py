"""Grain's MapDataset and IterDataset: indexing, repr, transforms, subclasses, errors, prefetch."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import grainfn
import grainfn as grain


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


def test_pipe_passes_the_dataset_first() -> None:
    def add(ds: Any, amount: int) -> Any:
        return ds.map(lambda x: x + amount)

    assert list(grain.MapDataset.range(3).pipe(add, amount=5)) == [5, 6, 7]
    assert list(grain.MapDataset.range(3).to_iter_dataset().pipe(add, 1)) == [1, 2, 3]


def test_mp_prefetch_takes_sequential_slice_and_its_output_stays_that_of_no_workers() -> None:
    ds = grain.MapDataset.range(30).seed(1).shuffle().to_iter_dataset().filter(lambda x: x % 4)
    options = grain.MultiprocessingOptions(num_workers=2)
    assert list(ds.mp_prefetch(options, sequential_slice=True)) == list(ds)


def add_draw(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.integers(1000)


@pytest.mark.grain
@pytest.mark.parametrize("seed", [893_247_023_984, 2**64 - 1, 2**64 + 5])
def test_random_map_takes_any_seed_grain_takes_with_the_same_draws(seed: int) -> None:
    import grain

    ours = grainfn.MapDataset.range(8).random_map(add_draw, seed=seed)
    theirs = grain.MapDataset.range(8).random_map(add_draw, seed=seed)
    assert [int(ours[i]) for i in range(12)] == [int(theirs[i]) for i in range(12)]
    ours_iter = grainfn.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    theirs_iter = grain.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    assert [int(x) for x in ours_iter] == [int(x) for x in theirs_iter]


@pytest.mark.grain
def test_negative_random_map_seeds_are_refused_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(3).random_map(add_draw, seed=-1)[0]
    with pytest.raises(ValueError, match="random_map seed must be an integer >= 0, got -1"):
        grainfn.MapDataset.range(3).random_map(add_draw, seed=-1)


@pytest.mark.grain
def test_slice_of_an_integer_is_a_value_error_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(10).slice(5)
    with pytest.raises(ValueError, match=r"takes a Python slice, got 5; ds\[i\] reads one"):
        grainfn.MapDataset.range(10).slice(5)


@pytest.mark.grain
def test_a_subclass_keeps_its_parent_objects_like_grain() -> None:
    import grain

    for lib in (grain, grainfn):

        class Doubled(lib.MapDataset):  # type: ignore[name-defined,misc]
            def __init__(self, parent: Any) -> None:
                super().__init__(parent)

            def __len__(self) -> int:
                return len(self._parent)

            def __getitem__(self, index: int) -> Any:
                return self._parent[index] * 2

        parent = lib.MapDataset.range(4)
        doubled = Doubled(parent)
        assert doubled.parents[0] is parent
        assert [doubled[i] for i in range(4)] == [0, 2, 4, 6]
        assert list(doubled.map(lambda x: x + 1)) == [1, 3, 5, 7]
