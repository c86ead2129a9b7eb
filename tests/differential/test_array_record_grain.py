"""grainfn's ArrayRecordDataSource against Grain 0.2.18's on the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn
from grainfn.sources import ArrayRecordDataSource, decode_array, write_array_records

pytestmark = pytest.mark.grain


def grain_source(paths: Any) -> Any:
    import grain

    return grain.sources.ArrayRecordDataSource(paths)


@pytest.mark.parametrize("fixture", ["one_shard", "three_shards"])
def test_len_getitem_and_getitems_agree_with_grain(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    paths = request.getfixturevalue(fixture)
    ours, theirs = ArrayRecordDataSource(paths), grain_source(paths)
    assert len(ours) == len(theirs) == 203
    assert [ours[i] for i in range(203)] == [theirs[i] for i in range(203)]
    indices = np.random.default_rng(1).integers(0, 203, size=150).tolist()
    assert ours.__getitems__(indices) == list(theirs.__getitems__(indices))


def test_grain_reads_what_write_array_records_wrote(tmp_path: Path) -> None:
    arrays = [np.full((2, 3), i, dtype=np.int32) for i in range(9)]
    paths = write_array_records(arrays, tmp_path / "arrays", num_shards=2)
    theirs = grain_source(paths)
    assert [decode_array(theirs[i]).tolist() for i in range(9)] == [a.tolist() for a in arrays]


@pytest.mark.parametrize(("seed", "batch"), [(3, 16), (0, 64), (11, 7)])
def test_shuffled_batched_pipelines_match_grain(
    three_shards: list[str], seed: int, batch: int
) -> None:
    import grain

    ours = grainfn.MapDataset.source(ArrayRecordDataSource(three_shards)).seed(seed).shuffle()
    theirs = grain.MapDataset.source(grain_source(three_shards)).seed(seed).shuffle()
    ours_batches, theirs_batches = list(ours.batch(batch)), list(theirs.batch(batch))
    assert len(ours_batches) == len(theirs_batches) == -(-203 // batch)
    for a, b in zip(ours_batches, theirs_batches):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    # The same through iterators, over two epochs, with a per-record map.
    ours_it = ours.repeat(2).map(len).to_iter_dataset().batch(batch)
    theirs_it = theirs.repeat(2).map(len).to_iter_dataset().batch(batch)
    for a, b in zip(ours_it, theirs_it, strict=True):
        np.testing.assert_array_equal(a, b)
