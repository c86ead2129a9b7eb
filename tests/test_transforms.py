"""Tests for grainfn._src.transforms: Grain's transformation classes as plain functions."""

from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src import transforms
from grainfn._src.transforms import Batch, Step


class Double(transforms.Map):
    def map(self, x: int) -> int:
        return 2 * x


class Odd(transforms.Filter):
    def filter(self, x: int) -> bool:
        return x % 2 == 1


class Digits(transforms.FlatMap):
    max_fan_out = 2

    def flat_map(self, x: int) -> list[int]:
        return [int(d) for d in str(x)]


class Positioned(transforms.MapWithIndex):
    def map_with_index(self, index: int, x: int) -> tuple[int, int]:
        return index, x


class Noise(transforms.RandomMap):
    def random_map(self, x: int, rng: np.random.Generator) -> int:
        return x + int(rng.integers(100))


class TfNoise(transforms.TfRandomMap):
    def np_random_map(self, x: int, rng: np.random.Generator) -> int:
        return x


def test_step_of_gives_the_stage_and_bound_method() -> None:
    double = Double()
    step = transforms.step_of(double)
    assert step == Step("map", double.map, double)
    assert transforms.step_of(Odd()).stage == "filter"
    assert transforms.step_of(Digits()).stage == "flat_map"
    assert transforms.step_of(Positioned()).stage == "map_with_index"
    assert transforms.step_of(Noise()).stage == "random_map"
    assert transforms.step_of(Batch(4, batch_fn=sum)) == Step("batch", sum, Batch(4, batch_fn=sum))
    assert transforms.step_of(print) is None
    assert transforms.step_of(TfNoise()) is None  # only the DataLoader's table takes it


def test_step_of_reads_the_table_it_is_given() -> None:
    table = ((TfNoise, "random_map", "np_random_map"),)
    noise = TfNoise()
    assert transforms.step_of(noise, table) == Step("random_map", noise.np_random_map, noise)
    assert transforms.step_of(Double(), table) is None


def test_as_function_takes_the_matching_class_or_a_callable() -> None:
    assert transforms.as_function(Double(), "map")(4) == 8
    assert transforms.as_function(abs, "filter") is abs


@pytest.mark.parametrize(
    ("transform", "method", "message"),
    [
        (Double(), "filter", r"filter got a Map transformation \(Double\); pass it to \.map"),
        (Digits(), "map", r"map got a FlatMap transformation \(Digits\); pass it to \.apply"),
        (Batch(2), "map", r"got a Batch transformation \(Batch\); pass it to \.batch\(\.\.\.\) or"),
        (3, "map", r"map takes a Map transformation or a callable, got 3\."),
    ],
)
def test_as_function_refuses_other_kinds_naming_the_method_that_takes_them(
    transform: Any, method: str, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        transforms.as_function(transform, method)


def test_apply_transformations_uses_the_datasets_methods() -> None:
    ds = grain.MapDataset.range(1, 13)
    out = transforms.apply_transformations(ds, [Double(), Batch(5, drop_remainder=True)])
    assert [b.tolist() for b in out] == [[2, 4, 6, 8, 10], [12, 14, 16, 18, 20]]
    flat = transforms.apply_transformations(ds.to_iter_dataset(), [Odd(), Double(), Digits()])
    assert list(flat) == [2, 6, 1, 0, 1, 4, 1, 8, 2, 2]
    single = transforms.apply_transformations(ds, Positioned())
    assert single[2] == (2, 3)
    iterated = transforms.apply_transformations(ds.to_iter_dataset(), [Double()])
    assert list(iterated)[:3] == [2, 4, 6]


def test_apply_transformations_refuses_plain_functions_and_tf_random_maps() -> None:
    ds = grain.MapDataset.range(3)
    with pytest.raises(TypeError, match=r"apply takes Map, .*got <built-in function abs>"):
        transforms.apply_transformations(ds, abs)
    with pytest.raises(NotImplementedError, match="TfNoise is a TfRandomMap, which the DataLoader"):
        transforms.apply_transformations(ds, TfNoise())


def test_batch_checks_its_flag_and_grains_names_are_the_classes() -> None:
    with pytest.raises(TypeError, match="Batch drop_remainder"):
        Batch(2, drop_remainder=1)  # type: ignore[arg-type]
    assert transforms.MapTransform is transforms.Map
    assert transforms.RandomMapTransform is transforms.RandomMap
    assert transforms.MapWithIndexTransform is transforms.MapWithIndex
    assert transforms.FilterTransform is transforms.Filter
    assert transforms.FlatMapTransform is transforms.FlatMap


def test_the_table_maps_every_class_to_a_stage_and_its_function() -> None:
    stages = {kind: (stage, attribute) for kind, stage, attribute in transforms.TRANSFORMS}
    assert stages[transforms.Map] == ("map", "map")
    assert stages[Batch] == ("batch", "batch_fn")
    assert len(stages) == 6
    with pytest.raises(TypeError, match="abstract"):
        transforms.Map()  # type: ignore[abstract]
