"""DataLoader states written by Grain, read into grainfn's loader and written back."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.dataset import ElementStage
from grainfn._src.core.loader_records import ONE_TO_ONE
from grainfn._src.core.state import DatasetPosition
from grainfn._src.grain_states.loaders import (
    dataset_position,
    grain_source_name,
    hash_of_paths,
    loader_from_grain,
    loader_to_grain,
    names_source,
    reads_loader_records,
    records_taken,
)
from grainfn._src.loader import legacy
from grainfn._src.loader.pipeline import loader_stream
from grainfn._src.loader.sampled import sampled
from grainfn._src.loader.samplers import SequentialSampler
from grainfn._src.loader.sharding import ShardOptions
from grainfn.sources import ArrayRecordDataSource

WHOLE = ShardOptions(0, 1)
SECOND_OF_THREE = ShardOptions(1, 3)


def state_after(stream: Any, count: int) -> Any:
    """The state of `stream` after `count` elements."""
    iterator = fn.iterate(stream)
    for _ in itertools.islice(iterator, count):
        pass
    return iterator.state


def grain_state(workers: int, last_seen: dict[str, Any], last_worker: int = -1) -> dict[str, Any]:
    """Grain's DataLoader state of `workers` workers (without its sampler and source)."""
    return {
        "worker_count": workers,
        "last_seen_indices": last_seen,
        "last_worker_index": last_worker,
    }


def test_records_taken_counts_the_shards_records_from_the_last_index() -> None:
    assert records_taken(grain_state(0, {"0": -1}), WHOLE) == 0  # the index before the first
    assert records_taken(grain_state(0, {"0": 7}), SECOND_OF_THREE) == 3  # indices 1, 4, 7
    assert records_taken(grain_state(0, {"0": -2}), SECOND_OF_THREE) == 0
    # Worker k of 2 returns local records k, k + 2, ...: the largest is the last taken.
    assert records_taken(grain_state(2, {"0": 4, "1": 3}), WHOLE) == 5
    assert records_taken(grain_state(2, {"0": 0, "1": -1}), WHOLE) == 1


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (grain_state(0, {"0": 1, "1": 2}), r"should map the worker numbers '0' to sampler"),
        (grain_state(2, {"0": 1}), r"worker numbers '0' to '1' .* with 2 workers"),
        (grain_state(2, [1, 2]), r"got \[1, 2\]"),  # type: ignore[arg-type]
        (grain_state(0, {"0": "3"}), "integer index for worker 0 in 'last_seen_indices'"),
        (grain_state(0, {"0": True}), "integer index for worker 0"),
        (grain_state(0, {"0": 5}), "names sampler index 5, which shard 1 of 3 does not read"),
        (grain_state(2, {"0": 1, "1": 7}), "sampler index 7 for worker 1 of 2, which that"),
        (grain_state(2, {"0": -8, "1": 1}), "before its first the index is -5"),
        ({"last_seen_indices": {"0": 1}}, "integer >= 0 in 'worker_count', got None"),
    ],
)
def test_records_taken_refuses_a_state_of_another_shard_or_loader(
    state: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        records_taken(state, SECOND_OF_THREE)


def batches_of_two(**options: Any) -> Any:
    return loader_stream(
        list(range(20)), SequentialSampler(20), [legacy.BatchOperation(2)], WHOLE, **options
    )


def test_a_loaders_state_round_trips_through_grains_without_workers() -> None:
    stream = batches_of_two()
    state = state_after(stream, 3)
    written = loader_to_grain(stream, state, WHOLE, 0)
    assert written == {
        "version": 2,
        "last_seen_indices": {"0": 5},  # the 6 records of 3 batches of 2
        "last_worker_index": -1,
        "worker_count": 0,
    }
    assert loader_from_grain(stream, written, WHOLE) == state


def test_maps_carry_over_any_worker_count_and_other_stages_only_0_or_1() -> None:
    mapped = loader_stream(
        list(range(20)), SequentialSampler(20), [legacy.MapOperation(str)], WHOLE
    )
    state = state_after(mapped, 5)
    written = loader_to_grain(mapped, state, WHOLE, 2)
    assert written["last_seen_indices"] == {"0": 4, "1": 3}
    assert written["last_worker_index"] == 0  # worker 0 returned the last (record 4)
    assert loader_from_grain(mapped, written, WHOLE) == state
    batched = batches_of_two()
    with pytest.raises(ValueError, match="cannot write Grain's DataLoader state for the stage"):
        loader_to_grain(batched, state_after(batched, 1), WHOLE, 2)
    with pytest.raises(ValueError, match="cannot be read for the stage 'batch"):
        loader_from_grain(batched, grain_state(2, {"0": 2, "1": 1}), WHOLE)


def test_a_record_inside_a_batch_is_another_loaders_state() -> None:
    with pytest.raises(ValueError, match="names record 3, inside a batch of 2"):
        loader_from_grain(batches_of_two(), grain_state(0, {"0": 2}), WHOLE)


def test_grains_worker_order_round_trips_for_its_worker_count() -> None:
    prefetched = batches_of_two(worker_count=2, grain_worker_order=True)
    ordered = prefetched.parent  # the workers' streams in turn, read here without workers
    state = state_after(ordered, 3)  # worker 0's batches 0 and 1, worker 1's batch 0
    written = loader_to_grain(ordered, state, WHOLE, 2)
    assert written["last_seen_indices"] == {"0": 6, "1": 3}
    assert written["last_worker_index"] == 0
    assert loader_from_grain(prefetched, written, WHOLE) == state
    with pytest.raises(ValueError, match="pass worker_count=2"):
        loader_to_grain(ordered, state, WHOLE, 3)
    with pytest.raises(ValueError, match="state is of 3 workers, but this loader yields"):
        loader_from_grain(ordered, dict(written, worker_count=3), WHOLE)


def test_dataset_position_counts_through_a_loaders_stages_only() -> None:
    records = sampled(list(range(9)), SequentialSampler(9), WHOLE)
    assert reads_loader_records(records)
    batched = fn.batch(2, fn.map(str, records))
    assert reads_loader_records(batched)
    assert dataset_position(batched, 4) == 2
    assert dataset_position(batched, 9) == 5  # the short last batch
    assert not reads_loader_records(fn.batch(2, fn.range(9)))
    assert dataset_position(fn.batch(2, fn.range(9)), 4) == 4


def test_grain_names_an_array_record_source_by_the_sha1_of_its_paths(
    three_shards: list[str],
) -> None:
    source = ArrayRecordDataSource(three_shards)
    digest = hash_of_paths(three_shards)
    assert len(digest) == 40 and digest != hash_of_paths(three_shards[::-1])
    assert hash_of_paths([]) == "da39a3ee5e6b4b0d3255bfef95601890afd80709"  # SHA-1 of nothing
    name = grain_source_name(source, "ignored")
    assert name == f"ArrayRecordDataSource(hash_of_paths={digest})"
    assert grain_source_name([1, 2], "list of 2") == "list of 2"
    assert names_source(name, source)
    assert not names_source(name, [1, 2])  # not an ArrayRecord source
    assert not names_source("list of 2", source)
    other = f"ArrayRecordDataSource(hash_of_paths={hash_of_paths(three_shards[:1])})"
    with pytest.raises(ValueError, match="State belongs to another DataLoader: Grain names"):
        names_source(other, source)


def test_a_dataset_position_is_a_record_position() -> None:
    stream = loader_stream(list(range(6)), SequentialSampler(6), [], WHOLE)
    assert loader_from_grain(stream, grain_state(0, {"0": 2}), WHOLE) == DatasetPosition(3)


SHARD = WHOLE


@dataclasses.dataclass(frozen=True, repr=False)
class Doubled(ElementStage[Any]):
    """A stage made up for these tests: one element per record, declared so and nothing else."""

    loader_records = ONE_TO_ONE

    def _get(self, index: int) -> Any:
        return self.parent._get(index)


@dataclasses.dataclass(frozen=True, repr=False)
class Undeclared(Doubled):
    """The same stage, declaring nothing: no DataLoader state is read through it."""

    loader_records = None


def loader(stage: type[Any]) -> fn.Stream:
    return fn.from_dataset(
        fn.batch(2, stage(sampled(list("abcdefg"), SequentialSampler(7), SHARD)))
    )


def test_a_declared_stage_is_walked_both_ways_with_any_worker_count() -> None:
    stream = loader(Doubled)
    for workers in (0, 1):  # a batch keeps Grain's order with one worker or none
        state = loader_to_grain(stream, DatasetPosition(2), SHARD, workers)
        assert loader_from_grain(stream, state, SHARD) == DatasetPosition(2)
    state = loader_to_grain(stream, DatasetPosition(2), SHARD, 0)
    assert state["last_seen_indices"] == {"0": 3}  # two batches of two records: 0 to 3


def test_a_stage_that_declares_nothing_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="for the stage 'Undeclared'"):
        loader_to_grain(loader(Undeclared), DatasetPosition(1), SHARD, 0)
