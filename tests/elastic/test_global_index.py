"""GlobalIndexBatches, Grain's elastic mode: every host reads every H-th position from one index.

The facade's `ElasticIterator` over a MapDataset wraps it; its Grain
differential tests are in tests/differential/test_elastic_grain.py, its
checkpoint files in tests/facade/test_elastic_iterator.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.elastic.global_index import GlobalIndexBatches, host_batches

DATA = fn.shuffle(fn.range(96), seed=5)


def hosts(count: int, size: int = 12, **kwargs: Any) -> list[GlobalIndexBatches]:
    return [GlobalIndexBatches(DATA, size, h, count, **kwargs) for h in range(count)]


def global_batches(iterators: list[GlobalIndexBatches], steps: int) -> list[np.ndarray]:
    return [np.concatenate([next(it) for it in iterators]) for _ in range(steps)]


def test_every_host_count_reads_the_same_positions_in_each_global_batch() -> None:
    for count in (1, 2, 3, 4, 6):
        got = global_batches(hosts(count), 8)
        for b, rows in enumerate(got):
            expected = DATA.get_many(list(range(12 * b, 12 * (b + 1))))
            assert sorted(rows.tolist()) == sorted(expected), (count, b)


def test_host_h_reads_every_hth_position_from_the_global_index() -> None:
    batches = host_batches(fn.range(20), 8, 6, shard_index=2, shard_count=3)
    assert [b.tolist() for b in fn.elements(batches)] == [[10, 13], [16, 19]]


def test_a_state_saved_by_some_hosts_restores_on_any_other_count() -> None:
    [one] = hosts(1)
    reference = global_batches([one], 8)
    four = hosts(4)
    global_batches(four, 3)
    assert {str(it.get_state()) for it in four} == {"{'global_next_index': 36}"}
    two = hosts(2)
    for it in two:
        it.set_state(four[0].get_state())
    for b, rows in enumerate(global_batches(two, 5), start=3):
        assert sorted(rows.tolist()) == sorted(reference[b].tolist())


def test_the_files_of_every_host_must_hold_one_state() -> None:
    [one] = hosts(1)
    one.set_state_from_files([("p0", {"global_next_index": 24}), ("p1", {"global_next_index": 24})])
    assert one.get_state() == {"global_next_index": 24}
    with pytest.raises(ValueError, match=r"State files p0 and p1 differ"):
        one.set_state_from_files(
            [("p0", {"global_next_index": 24}), ("p1", {"global_next_index": 12})]
        )


def test_a_bad_state_is_refused_naming_it_and_nothing_changes() -> None:
    [one] = hosts(1)
    next(one)
    with pytest.raises(ValueError, match=r"takes a state \{'global_next_index': n\}"):
        one.set_state({"next_index": 3})
    with pytest.raises(ValueError, match="global_next_index must be an integer >= 0, got -1"):
        one.set_state({"global_next_index": -1})
    assert one.get_state() == {"global_next_index": 12}


def test_a_dataset_with_holes_or_an_uneven_batch_is_refused() -> None:
    with pytest.raises(ValueError, match=r"does not support `filter`.*num_logical_shards"):
        GlobalIndexBatches(fn.filter(lambda x: x % 2, fn.range(10)), 2, 0, 1)
    with pytest.raises(ValueError, match="Global batch size 5 is not divisible by shard count 2"):
        GlobalIndexBatches(fn.range(10), 5, 0, 2)


def test_reading_options_change_nothing() -> None:
    plain = global_batches(hosts(2), 6)
    threaded = hosts(2, threads=4, buffer=8, workers=0)
    try:
        np.testing.assert_array_equal(np.stack(global_batches(threaded, 6)), np.stack(plain))
    finally:
        for it in threaded:
            it.close()
