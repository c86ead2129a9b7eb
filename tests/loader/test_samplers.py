"""The loader's samplers (grainfn/_src/loader/samplers.py): bad arguments and indices are named.

The DataLoader that reads them is tested in tests/facade/test_data_loader.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn as grain


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_records": 0}, ValueError, "num_records must be a positive integer, got 0"),
        ({"num_epochs": 0}, ValueError, "num_epochs must be a positive integer, got 0"),
        ({"shuffle": True}, ValueError, r"shuffle=True\) needs a seed"),
        ({"seed": -1}, ValueError, r"seed must be an integer in \[0, 2\*\*32\), got -1"),
        ({"seed": 2**32}, ValueError, r"seed must be an integer in \[0, 2\*\*32\)"),
        (
            {"num_records": 2, "shard_options": grain.ShardOptions(2, 3)},
            ValueError,
            "Shard 2 of 3 gets no records of 2",
        ),
    ],
)
def test_bad_sampler_arguments(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        grain.IndexSampler(**{"num_records": 5, **kwargs})


def test_sampler_index_out_of_range() -> None:
    sampler = grain.IndexSampler(5, num_epochs=1)
    assert sampler[4].record_key == 4
    with pytest.raises(
        IndexError, match=r"Sampler index 5 is out of range: valid indices are \[0, 5\)"
    ):
        sampler[5]
