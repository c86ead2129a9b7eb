"""LoaderRecords: how a DataLoader's stage follows the records Grain's DataLoader counts."""

from __future__ import annotations

from grainfn import fn
from grainfn._src.core.loader_records import (
    IN_EACH_WORKER,
    ONE_TO_ONE,
    SHARD_RECORDS,
    WORKER_SHARE,
    LoaderRecords,
)
from grainfn._src.stages.batch import BatchedDataset, BatchedStream
from grainfn._src.stages.filter import FilteredDataset
from grainfn._src.stages.map import MappedDataset, MappedStream


def test_the_walk_passes_maps_filters_and_batches_and_ends_at_the_records() -> None:
    assert ONE_TO_ONE.passes and ONE_TO_ONE.any_workers
    assert IN_EACH_WORKER.passes and not IN_EACH_WORKER.any_workers
    assert not SHARD_RECORDS.passes and SHARD_RECORDS.records
    assert not WORKER_SHARE.passes and WORKER_SHARE.share


def test_a_batch_counts_its_parents_positions_both_ways() -> None:
    batched = fn.batch(2, fn.range(5))
    declared = batched.loader_records
    assert isinstance(declared, LoaderRecords) and not declared.any_workers
    assert [declared.position_after(batched, n) for n in (0, 2, 4, 5)] == [0, 1, 2, 3]
    assert [declared.parent_position(batched, p) for p in (0, 1, 2, 3)] == [0, 2, 4, 5]


def test_the_stages_declare_it_in_their_modules() -> None:
    assert MappedDataset.loader_records is ONE_TO_ONE and MappedStream.loader_records is ONE_TO_ONE
    assert FilteredDataset.loader_records is IN_EACH_WORKER
    assert BatchedStream.loader_records is IN_EACH_WORKER
    assert BatchedDataset.loader_records is not None
