"""Parquet files written with pyarrow once per session, read by the format tests."""

from __future__ import annotations

import pytest

from support.parquet_files import write_many_files, write_typed_file


@pytest.fixture(scope="session")
def typed_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`support.parquet_files.typed_table()` in 8 row groups."""
    return write_typed_file(tmp_path_factory.mktemp("typed"))


@pytest.fixture(scope="session")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """18 files (more than the 16 read at once) of 0 to 9 rows in 1 to 3 row groups."""
    return write_many_files(tmp_path_factory.mktemp("many"))
