"""LogicalShardBatches: a host's batches of logical shards, restored on any host count.

The facade's `ElasticIterator` over an IterDataset wraps it; its checkpoint
files and Orbax restores are tested in tests/facade/test_elastic_iterator.py, the stream
itself in test_stream.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.elastic.logical_batches import LogicalShardBatches

STREAM = fn.filter(lambda x: x % 3, fn.from_dataset(fn.shuffle(fn.range(400), seed=2)))


def hosts(count: int, **kwargs: Any) -> list[LogicalShardBatches]:
    return [LogicalShardBatches(STREAM, 12, h, count, **kwargs) for h in range(count)]


def take(iterators: list[LogicalShardBatches], steps: int) -> list[np.ndarray]:
    return [np.concatenate([next(it) for it in iterators]) for _ in range(steps)]


def saved(iterators: list[LogicalShardBatches]) -> list[tuple[str, Any]]:
    return [(f"host {h}", it.get_state()) for h, it in enumerate(iterators)]


def test_a_run_moves_between_host_counts_taking_the_saved_number_of_shards() -> None:
    reference = take(hosts(1, num_logical_shards=6), 12)
    three = hosts(3, num_logical_shards=6)
    got = take(three, 4)
    two = hosts(2)  # no number of its own: the saved one (6) is taken
    for it in two:
        it.set_state_from_files(saved(three))
    assert {it.layout.num_logical_shards for it in two} == {6}
    got += take(two, 4)
    [one] = hosts(1)
    one.set_state_from_files(saved(two))
    got += take([one], 4)
    np.testing.assert_array_equal(np.stack(got), np.stack(reference))


def test_a_number_of_shards_of_its_own_refuses_another_and_keeps_reading() -> None:
    [four] = hosts(1, num_logical_shards=4)
    [six] = hosts(1, num_logical_shards=6)
    first = next(six)
    with pytest.raises(ValueError, match="num_logical_shards=4, this iterator has"):
        six.set_state(four.get_state())
    assert six.layout.num_logical_shards == 6
    assert len(first) == len(next(six)) == 12


def test_a_bad_layout_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match="global_batch_size 12 is not a multiple of"):
        LogicalShardBatches(STREAM, 12, 0, 1, num_logical_shards=5)


def test_workers_change_nothing() -> None:
    reference = take(hosts(2, num_logical_shards=4), 5)
    with_workers = hosts(2, num_logical_shards=4, workers=0, worker_options={})
    try:
        np.testing.assert_array_equal(np.stack(take(with_workers, 5)), np.stack(reference))
    finally:
        for it in with_workers:
            it.close()
