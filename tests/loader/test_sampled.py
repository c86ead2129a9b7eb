"""Tests for grainfn._src.loader.sampled: the records one DataLoader shard reads."""

import numpy as np
import pytest

from grainfn._src.core.validate import UserStopIterationError
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn._src.loader.sampled import SampledDataset, sampled
from grainfn._src.loader.samplers import IndexSampler, SequentialSampler
from grainfn._src.loader.sharding import NoSharding, ShardOptions

SOURCE = [f"r{i}" for i in range(10)]


class ReversedSampler:
    """A user's sampler (Grain's protocol only): reads the source backwards."""

    def __getitem__(self, index: int) -> RecordMetadata:
        if index >= 10:
            raise IndexError(index)
        return RecordMetadata(index, record_key=9 - index)

    def __repr__(self) -> str:
        return "ReversedSampler()"


def test_position_i_of_shard_s_of_n_reads_sampler_index_i_times_n_plus_s() -> None:
    ds = sampled(SOURCE, SequentialSampler(10), ShardOptions(1, 3))
    assert isinstance(ds, SampledDataset)
    assert ds.length == 3
    assert [r.metadata.index for r in ds.get_many(range(3))] == [1, 4, 7]
    assert [r.data for r in ds.get_many(range(3))] == ["r1", "r4", "r7"]
    assert ds.get(4) == ds.get(1)  # position 4 is epoch 1 of a shard of 3


def test_blocks_and_single_reads_give_the_same_seeded_records() -> None:
    sampler = IndexSampler(10, NoSharding(), shuffle=True, num_epochs=1, seed=3)
    ds = sampled(SOURCE, sampler, NoSharding())
    one_by_one = [ds.get(i) for i in range(10)]
    assert ds.get_many(np.arange(10)) == one_by_one
    assert one_by_one == [Record(sampler[i], SOURCE[sampler[i].record_key]) for i in range(10)]
    assert sorted(r.data for r in one_by_one) == sorted(SOURCE)


def test_a_users_sampler_is_read_record_by_record() -> None:
    ds = sampled(SOURCE, ReversedSampler(), ShardOptions(0, 2))
    assert [r.data for r in ds.get_many(np.arange(5))] == ["r9", "r7", "r5", "r3", "r1"]
    assert ds.describe_stage() == "sample(ReversedSampler(), shard 0 of 2)"


def test_a_samplers_stop_iteration_is_an_error_that_names_the_position() -> None:
    class Stopping(ReversedSampler):
        def __repr__(self) -> str:
            return "Stopping()"

        def __getitem__(self, index: int) -> RecordMetadata:
            if index == 2:
                raise StopIteration
            return super().__getitem__(index)

    ds = sampled(SOURCE, Stopping(), NoSharding())
    message = (
        r"function of sample\(Stopping\(\), shard 0 of 1\) raised StopIteration, reading position 2"
    )
    with pytest.raises(UserStopIterationError, match=message) as error:
        ds.get(2)
    assert isinstance(error.value.__cause__, StopIteration)
