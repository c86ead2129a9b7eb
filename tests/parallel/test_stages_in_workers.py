"""zip, interleave, window shuffle and rebatch under mp_prefetch: workers change nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn.experimental import (
    InterleaveIterDataset,
    RebatchIterDataset,
    WindowShuffleIterDataset,
    ZipIterDataset,
    ZipMapDataset,
)
from grainfn.testing import assert_deterministic

from support.facade_resuming import assert_same_under_workers


def square(x: int) -> np.ndarray:
    return np.full((2,), x * x, dtype=np.int64)


def shard(i: int) -> Any:
    return grain.MapDataset.range(10 * i, 10 * i + i + 2).map(square)


def zipped() -> Any:
    a = ZipMapDataset([grain.MapDataset.range(12).map(square), grain.MapDataset.range(12)])
    b = grain.MapDataset.range(30).filter(lambda x: x % 3).map(square).to_iter_dataset()
    zipped = ZipIterDataset([a.to_iter_dataset(), b], strict=False)
    return zipped.map(lambda t: t[0][0] + t[0][1] + t[1])


def interleaved_and_rebatched() -> Any:
    ds: Any = InterleaveIterDataset([shard(i) for i in range(5)], cycle_length=3)
    ds = WindowShuffleIterDataset(ds, window_size=4, seed=11).batch(3)
    return RebatchIterDataset(ds, batch_size=4)


def interleaved_from_a_dataset() -> Any:
    return InterleaveIterDataset(grain.MapDataset.range(4).map(shard), cycle_length=2).batch(2)


@pytest.mark.parametrize("make", [zipped, interleaved_and_rebatched, interleaved_from_a_dataset])
def test_the_output_and_the_states_do_not_depend_on_the_worker_count(make: Any) -> None:
    assert_same_under_workers(make)


def core_pipelines() -> list[Any]:
    shards = [fn.from_dataset(fn.range(10 * i, 10 * i + i)) for i in range(4)]
    return [
        lambda: fn.zip([fn.range(5), fn.shuffle(fn.range(7), seed=1)]),
        lambda: fn.zip(shards[1:], strict=False),
        lambda: fn.interleave(2, shards),
        lambda: fn.interleave(2, fn.map(fn.range, fn.range(5))),
        lambda: fn.window_shuffle(3, fn.from_dataset(fn.range(10)), seed=4),
        lambda: fn.rebatch(3, fn.batch(2, fn.from_dataset(fn.range(11)))),
    ]


@pytest.mark.parametrize("make", core_pipelines())
def test_every_stage_is_deterministic_pickles_and_compares_equal(make: Any) -> None:
    assert_deterministic(make)
    assert make() == make()
