"""The host's rows of a map-level pipeline read as one dataset: positions, detection, cursor."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.state import DatasetPosition
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.rows import HostRows, RowsCursor, whole_dataset
from grainfn._src.elastic.stream import host_stream

LAYOUT = Layout(8, 4, host=1, num_hosts=2)
"""Two rows from each of 4 shards; host 1 runs shards 2 and 3 (rows 4 to 8)."""


def test_host_rows_are_the_positions_of_its_shards_elements_in_batch_order() -> None:
    rows = HostRows(fn.range(100), LAYOUT, 2)
    assert rows.length == 8  # 2 batches of 2 shards of 2 rows
    # Element k of shard s is position s + 4k: shard 2 gives 2, 6, then 10, 14.
    assert [rows.get(i) for i in range(8)] == [2, 6, 3, 7, 10, 14, 11, 15]
    np.testing.assert_array_equal(rows.parent_indices(np.arange(4)), [2, 6, 3, 7])
    assert rows.describe_stage() == "host_rows(4:8)"


def test_host_rows_give_the_hosts_part_of_each_global_batch() -> None:
    ds = fn.shuffle(fn.range(64), seed=4)
    rows = HostRows(ds, LAYOUT, 3)
    batches = [b.tolist() for b in fn.iterate(host_stream(fn.from_dataset(ds), LAYOUT))]
    assert [rows.get(i) for i in range(rows.length)] == [x for b in batches[:3] for x in b]


def test_whole_dataset_finds_the_one_dataset_every_shard_slices() -> None:
    ds = fn.range(40)
    plain = host_stream(fn.from_dataset(ds), LAYOUT)
    assert whole_dataset(plain.components, LAYOUT) is ds
    mapped = fn.map(str, ds)
    read = host_stream(fn.from_dataset(mapped), LAYOUT)
    assert whole_dataset(read.components, LAYOUT) is mapped


def test_whole_dataset_is_none_where_the_shards_do_more_than_read_in_order() -> None:
    ds = fn.range(40)
    filtered = host_stream(fn.filter(lambda x: x % 3, fn.from_dataset(ds)), LAYOUT)
    assert whole_dataset(filtered.components, LAYOUT) is None  # holes
    batched = host_stream(fn.batch(2, fn.from_dataset(ds)), LAYOUT)
    assert whole_dataset(batched.components, LAYOUT) is None  # a stream stage above
    nones = host_stream(fn.from_dataset(ds, allow_nones=True), LAYOUT)
    assert whole_dataset(nones.components, LAYOUT) is None
    other = host_stream(fn.from_dataset(ds), Layout(8, 4, host=0, num_hosts=2))
    assert whole_dataset(other.components, LAYOUT) is None  # other shards' slices


def test_the_rows_cursor_reads_batches_and_says_each_shards_position() -> None:
    ds = fn.range(20)  # 5 elements per shard: 2 batches of 2 rows, one element left
    components = host_stream(fn.from_dataset(ds), LAYOUT).components
    cursor = RowsCursor(components, ds, LAYOUT, 0)
    assert cursor.positions() == (0, (DatasetPosition(0), DatasetPosition(0)))
    assert cursor.next().tolist() == [2, 6, 3, 7]
    assert cursor.positions() == (1, (DatasetPosition(2), DatasetPosition(2)))
    assert cursor.next().tolist() == [10, 14, 11, 15]
    assert not cursor.stopped
    with pytest.raises(StopIteration):
        cursor.next()
    assert cursor.stopped
    resumed = RowsCursor(components, ds, LAYOUT, 1)
    assert resumed.next().tolist() == [10, 14, 11, 15]
