"""Layout: the logical shards of a global batch, and which rows each host computes."""

from __future__ import annotations

import pytest

from grainfn._src.elastic.layout import Layout, valid_host_counts


def test_valid_host_counts_are_the_divisors_of_the_shard_count() -> None:
    assert valid_host_counts(1) == (1,)
    assert valid_host_counts(7) == (1, 7)
    assert valid_host_counts(12) == (1, 2, 3, 4, 6, 12)
    with pytest.raises(ValueError, match="num_logical_shards must be a positive integer"):
        valid_host_counts(0)


def test_the_hosts_rows_stacked_in_host_order_are_the_global_batch() -> None:
    for shards in (1, 2, 4, 6, 12):
        for hosts in valid_host_counts(shards):
            parts = [Layout(3 * shards, shards, h, hosts) for h in range(hosts)]
            assert [r for p in parts for r in p.rows] == list(range(3 * shards))
            assert [s for p in parts for s in p.shards] == list(range(shards))
            for part in parts:  # a host's rows are those of its shards
                assert part.rows_per_shard == 3
                assert part.shards_per_host == shards // hosts
                assert len(part.rows) == part.shards_per_host * part.rows_per_shard
                assert part.rows.start == part.shards.start * part.rows_per_shard


def test_for_host_keeps_the_global_batch_and_the_shards() -> None:
    layout = Layout(12, 6)
    other = layout.for_host(2, 3)
    assert other == Layout(12, 6, host=2, num_hosts=3)
    assert other.shards == range(4, 6) and other.rows == range(8, 12)
    assert layout.shards == range(6)  # frozen: the original is unchanged


def test_counts_given_as_numpy_integers_are_kept_as_ints() -> None:
    import numpy as np

    layout = Layout(np.int64(8), np.int32(4), np.int64(1), np.int64(2))
    assert layout == Layout(8, 4, 1, 2)
    assert all(type(v) is int for v in vars(layout).values())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((8, 6, 0, 4), "6 logical shards allow 1, 2, 3 or 6 hosts"),
        ((8, 7, 0, 2), "7 logical shards allow 1 or 7 hosts"),
        ((9, 6, 0, 3), "global_batch_size 9 is not a multiple of num_logical_shards 6"),
        ((9, 6, 0, 3), "Use a global batch size of 6 or 12"),
        ((3, 6, 0, 1), "Use a global batch size of 6, or another"),  # no multiple below 3
        ((8, 4, 2, 2), r"host \(shard_index\) must be in \[0, 2\) for 2 hosts, got 2"),
        ((8, 4, -1, 2), r"host \(shard_index\)"),
        ((8, 0, 0, 1), "num_logical_shards must be a positive integer"),
        ((0, 4, 0, 1), "global_batch_size must be a positive integer"),
        ((8, 4, 0, 0), r"num_hosts \(shard_count\) must be a positive integer"),
    ],
)
def test_a_layout_that_cannot_be_is_refused(args: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Layout(*args)
