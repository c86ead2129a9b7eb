"""Logical shards: the same stages over every `n`-th position of a pipeline's leaves."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.shards.logical import logical_shard, positions_to_cut


def test_the_logical_shards_read_each_leaf_position_once() -> None:
    stream = fn.from_dataset(fn.shuffle(fn.range(103), seed=5))
    read = [x for s in range(4) for x in fn.iterate(logical_shard(stream, s, 4))]
    assert sorted(read) == list(range(103))


def test_a_mix_of_named_streams_is_cut_in_every_component() -> None:
    a = fn.from_dataset(fn.range(40))
    b = fn.from_dataset(fn.range(100, 140))
    mixed = fn.mix({"a": a, "b": b}, {"a": 1, "b": 1})
    shard = list(fn.iterate(logical_shard(mixed, 1, 4)))
    assert shard[:6] == [1, 101, 5, 105, 9, 109]


def test_a_stage_without_positions_to_slice_is_refused() -> None:
    datasets = fn.source([fn.range(3), fn.range(4)])
    interleaved = fn.interleave(2, datasets)
    with pytest.raises(ValueError, match="cannot be cut from 'interleave"):
        logical_shard(interleaved, 0, 2)


def test_a_stream_random_map_draws_differently_in_every_shard() -> None:
    def draw(x: int, rng: np.random.Generator) -> float:
        return float(rng.random())

    stream = fn.random_map(draw, fn.from_dataset(fn.range(40)), seed=3)
    whole = list(fn.iterate(stream))
    shards = [list(fn.iterate(logical_shard(stream, s, 4))) for s in range(4)]
    # Element k of shard s takes the draws of index s + 4k: together, those of the whole.
    assert sorted(x for shard in shards for x in shard) == sorted(whole)
    assert shards[1][2] == whole[1 + 4 * 2]


def test_a_dataset_is_cut_as_the_stream_that_reads_it() -> None:
    dataset = fn.shuffle(fn.range(10), seed=1)
    stream = fn.from_dataset(dataset)
    assert positions_to_cut(dataset) == positions_to_cut(stream) == 10
    for shard in range(3):
        got = list(fn.iterate(fn.logical_shard(dataset, shard, 3)))
        assert got == list(fn.iterate(fn.logical_shard(stream, shard, 3)))
        assert got == [dataset.get(p) for p in range(shard, 10, 3)]
    with pytest.raises(TypeError, match="logical_shard"):
        fn.logical_shard([1, 2], 0, 2)  # type: ignore[arg-type]
