"""Parquet files through pyarrow: paths, opening with named errors, row groups as rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from grainfn._src.formats.parquet.files import (
    check_paths,
    open_file,
    pyarrow_parquet,
    read_row_group,
    row_group_sizes,
    rows,
)

from support.parquet_files import write


def test_pyarrow_parquet_is_the_module() -> None:
    import pyarrow.parquet

    assert pyarrow_parquet() is pyarrow.parquet


def test_paths_are_one_path_or_a_sequence_of_them() -> None:
    assert check_paths(Path("a.parquet")) == ("a.parquet",)
    assert check_paths(("a", Path("b"))) == ("a", "b")
    with pytest.raises(ValueError, match="paths is an empty sequence"):
        check_paths(())
    with pytest.raises(TypeError, match=r"path must be a Parquet file .* got 3 of type int"):
        check_paths(3)
    with pytest.raises(TypeError, match="of type bytes"):
        check_paths(b"a.parquet")
    with pytest.raises(TypeError, match=r"must be a str or os\.PathLike, got 3"):
        check_paths(["a", 3])


def test_a_file_opens_with_its_row_groups_read_as_numpy_columns(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array(range(5), pa.int64()), "s": ["a", "b", None, "d", "e"]})
    parquet_file = open_file(write(table, tmp_path / "t.parquet", 2), {})
    assert row_group_sizes(parquet_file) == (2, 2, 1)
    names, columns = read_row_group(parquet_file, 1)
    assert names == ["x", "s"]
    assert columns[0].tolist() == [2, 3] and columns[1].tolist() == [None, "d"]


def test_a_null_turns_a_row_groups_integers_into_floats_as_in_grain(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array([1, None, 3, 4], pa.int64())})
    parquet_file = open_file(write(table, tmp_path / "t.parquet", 2), {})
    with_null = read_row_group(parquet_file, 0)[1][0]
    without = read_row_group(parquet_file, 1)[1][0]
    assert with_null.dtype == np.float64 and np.isnan(with_null[1])
    assert without.dtype == np.int64


def test_rows_are_dicts_of_the_columns_entries() -> None:
    columns = [np.arange(5), np.array(["a", "b", "c", "d", "e"], object)]
    got = rows(["x", "s"], columns, 1, 4)
    assert got == [{"x": 1, "s": "b"}, {"x": 2, "s": "c"}, {"x": 3, "s": "d"}]
    assert type(got[0]["x"]) is np.int64
    assert rows(["x", "s"], columns, 2, 2) == []


def test_open_file_names_what_is_wrong(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.parquet")
    with pytest.raises(FileNotFoundError, match=f"Parquet file '{missing}' does not exist"):
        open_file(missing, {})
    with pytest.raises(ValueError, match="is a directory, not a Parquet file"):
        open_file(str(tmp_path), {})
    text = tmp_path / "notes.txt"
    text.write_text("not parquet")
    with pytest.raises(ValueError, match=r"notes\.txt' is not a readable Parquet file"):
        open_file(str(text), {})
    good = write(pa.table({"x": [1]}), tmp_path / "x.parquet", 1)
    with pytest.raises(TypeError, match=r"rejects the read options \{'bad': 1\}"):
        open_file(good, {"bad": 1})
