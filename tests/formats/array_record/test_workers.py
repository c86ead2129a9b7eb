"""ArrayRecord sources in worker processes and in checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import grainfn
from grainfn.sources import ArrayRecordDataSource, write_array_records


def record_length(record: bytes) -> int:
    return len(record)


def test_mp_prefetch_with_two_workers_gives_the_same_batches_and_states(
    three_shards: list[str],
) -> None:
    def build(source: ArrayRecordDataSource) -> grainfn.IterDataset:
        ds = grainfn.MapDataset.source(source).seed(5).shuffle().to_iter_dataset()
        return ds.batch(10)

    source = ArrayRecordDataSource(three_shards)
    source[0]  # the parent's open readers must not travel to the workers
    expected = list(build(source))
    options = grainfn.MultiprocessingOptions(num_workers=2, per_worker_buffer_size=2)
    with iter(build(source).mp_prefetch(options)) as it:
        head = [next(it) for _ in range(7)]
        state = json.loads(json.dumps(it.get_state()))
        tail = list(it)
    assert len(head) + len(tail) == len(expected) == 21
    for got, want in zip(head + tail, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    # A state saved with workers restores without them, on a new source over the same files.
    resumed = iter(build(ArrayRecordDataSource(list(three_shards))))
    resumed.set_state(state)
    for got, want in zip(resumed, expected[7:], strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_state_is_refused_by_a_pipeline_over_other_files(
    three_shards: list[str], tmp_path: Path
) -> None:
    copies = write_array_records(list(ArrayRecordDataSource(three_shards)), tmp_path / "copy")

    def iterator(paths: list[str]) -> grainfn.DatasetIterator:
        source = ArrayRecordDataSource(paths)
        return iter(grainfn.MapDataset.source(source).map(record_length).to_iter_dataset())

    it = iterator(three_shards)
    next(it)
    with pytest.raises(ValueError, match=r"another pipeline: stage line \d+ is .*data-00000"):
        iterator(copies).set_state(it.get_state())
    same = iterator(three_shards)
    same.set_state(it.get_state())
    assert next(same) == record_length(ArrayRecordDataSource(three_shards)[1])
