"""Tests for grainfn._src.loader.pipeline: a DataLoader's stream, built from its operations."""

from typing import Any

import numpy as np
import pytest

from grainfn import fn, transforms
from grainfn._src.loader import legacy
from grainfn._src.loader.pipeline import (
    check_operation,
    check_ray_pool,
    is_operation,
    loader_stream,
)
from grainfn._src.loader.samplers import IndexSampler, SequentialSampler
from grainfn._src.loader.sharding import NoSharding, ShardOptions


class AddTen(transforms.Map):
    def map(self, x: int) -> int:
        return x + 10


class Even(transforms.Filter):
    def filter(self, x: int) -> bool:
        return x % 2 == 0


class Twice(transforms.FlatMap):
    max_fan_out = 2

    def flat_map(self, x: int) -> list[int]:
        return [x, x]


class WithIndex(transforms.MapWithIndex):
    def map_with_index(self, index: int, x: int) -> tuple[int, int]:
        return index, x


class Draw(transforms.RandomMap):
    def random_map(self, x: int, rng: np.random.Generator) -> int:
        return int(rng.integers(1000))


def read(operations: list[Any], shard: Any = None, count: int = 10, **options: Any) -> list[Any]:
    stream = loader_stream(
        list(range(count)), SequentialSampler(count), operations, shard or NoSharding(), **options
    )
    return [e.tolist() if isinstance(e, np.ndarray) else e for e in fn.iterate(stream)]


def test_operations_apply_in_order_to_the_shards_records() -> None:
    assert read([AddTen(), Even(), transforms.Batch(2)]) == [[10, 12], [14, 16], [18]]
    assert read([WithIndex()], shard=ShardOptions(1, 3)) == [(1, 1), (4, 4), (7, 7)]
    assert read([Twice(), transforms.Batch(3, drop_remainder=True)], count=4) == [
        [0, 0, 1],
        [1, 2, 2],
    ]


def test_legacy_operations_are_taken_as_the_transformations_they_stand_for() -> None:
    operations = [legacy.MapOperation(lambda x: x * 3), legacy.BatchOperation(4)]
    assert read(operations) == [[0, 3, 6, 9], [12, 15, 18, 21], [24, 27]]
    assert read([legacy.FilterOperation(lambda x: x > 6)]) == [7, 8, 9]


def test_random_maps_draw_from_the_samplers_seed_alone() -> None:
    sampler = IndexSampler(10, NoSharding(), shuffle=False, num_epochs=1, seed=5)

    def draws() -> list[int]:
        return list(fn.iterate(loader_stream(list(range(10)), sampler, [Draw()], NoSharding())))

    assert draws() == draws()
    assert len(set(draws())) > 1


def stage_names(stream: Any) -> list[str]:
    return [line.strip().split("(")[0] for line in repr(stream).splitlines()]


def test_the_pipeline_stays_a_dataset_until_a_batch_follows_a_filter() -> None:
    def names(operations: list[Any]) -> list[str]:
        stream = loader_stream(list(range(6)), SequentialSampler(6), operations, NoSharding())
        return stage_names(stream)[:-2]  # less the sampler and the source

    # A batch, then a filter: all map-level, one from_dataset at the end.
    assert names([transforms.Batch(2), Even()]) == ["from_dataset", "map", "filter", "batch"]
    # A filter, then a batch: the batch runs on the stream (the filter left holes).
    assert names([Even(), transforms.Batch(2)]) == ["map", "batch", "from_dataset", "filter"]
    assert names([AddTen(), Twice()]) == ["map", "flat_map", "from_dataset", "map"]


def test_operations_that_cannot_be_checkpointed_are_refused_with_the_classes_taken() -> None:
    assert is_operation(AddTen()) and is_operation(legacy.BatchOperation(2))
    assert not is_operation(print)
    assert check_operation(Even()).__class__ is Even
    with pytest.raises(TypeError, match=r"must be Map, RandomMap.*got <built-in function print>"):
        check_operation(print)
    with pytest.raises(TypeError, match=r"of type function\. A function of the whole iterator"):
        read([lambda it: it])


def test_a_ray_pool_must_be_a_ray_pool_and_excludes_worker_processes() -> None:
    assert check_ray_pool(None, 4) is None
    with pytest.raises(
        TypeError, match=r"ray_pool must be a grainfn\.fn\.RayPool, got 3 of type int"
    ):
        check_ray_pool(3, 0)


def test_too_many_workers_in_grain_order_are_refused_before_any_is_built() -> None:
    with pytest.raises(ValueError, match="worker_count"):
        loader_stream(
            list(range(10)),
            SequentialSampler(10),
            [],
            NoSharding(),
            worker_count=2000,
            grain_worker_order=True,
        )
