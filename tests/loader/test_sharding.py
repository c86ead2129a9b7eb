"""The loader's shard options (grainfn/_src/loader/sharding.py)."""

from __future__ import annotations

import pytest

import grainfn as grain


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((3, 3), r"shard_index must be in \[0, shard_count\) = \[0, 3\), got 3"),
        ((0, 0), "shard_count"),
    ],
)
def test_bad_shard_options(args: tuple[int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grain.ShardOptions(*args)


def test_shard_by_jax_process_in_one_process() -> None:
    options = grain.ShardByJaxProcess(drop_remainder=True)
    assert (options.shard_index, options.shard_count, options.drop_remainder) == (0, 1, True)
