"""Shared ArrayRecord files: written once per session, read by many tests."""

from __future__ import annotations

import pytest

from grainfn.sources import write_array_records

RECORDS = [f"record {i:03d} ".encode() * (1 + i % 5) for i in range(203)]
"""Records of varying sizes, every one distinct, so a misplaced read shows."""


@pytest.fixture(scope="session")
def three_shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`RECORDS` in three shard files of 68, 68 and 67 records."""
    folder = tmp_path_factory.mktemp("three")
    return write_array_records(RECORDS, folder / "data", num_shards=3)


@pytest.fixture(scope="session")
def one_shard(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`RECORDS` in one file."""
    folder = tmp_path_factory.mktemp("one")
    return write_array_records(RECORDS, folder / "single.array_record")


@pytest.fixture(scope="session")
def records() -> list[bytes]:
    """The records the shared files hold, in order."""
    return list(RECORDS)
