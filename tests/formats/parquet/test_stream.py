"""ParquetIterDataset and the core Parquet stream: Grain's rows, resuming anywhere, errors."""

from __future__ import annotations

import itertools
import math
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grainfn
from grainfn import fn
from grainfn.experimental import ParquetIterDataset
from grainfn.fn import ParquetPosition, parquet
from grainfn.testing import assert_resumable

from support.parquet_files import TYPED_ROWS, write


def assert_same(ours: Any, theirs: Any, where: str = "row") -> None:
    """Equal values of the same types: scalars' numpy types, dtypes, dict key order; NaN == NaN."""
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{where}: {ours!r} is not an array"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), where
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    else:
        assert type(ours) is type(theirs), f"{where}: {ours!r} vs {theirs!r}"
        both_nan = isinstance(theirs, (float, np.floating)) and math.isnan(theirs)
        assert (both_nan and math.isnan(ours)) or ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def assert_rows_equal(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_same(a, b, f"row {i}")


def grain_rows(path: Any, **read_kwargs: Any) -> list[Any]:
    import grain

    return list(grain.experimental.ParquetIterDataset(path, **read_kwargs))


@pytest.mark.grain
def test_rows_of_every_column_type_equal_grains(typed_file: str) -> None:
    ours = list(ParquetIterDataset(typed_file))
    assert len(ours) == TYPED_ROWS == pq.ParquetFile(typed_file).metadata.num_rows
    assert_rows_equal(ours, grain_rows(typed_file))
    # The per-row-group conversion shows: a null turns row group 0's ints into floats.
    assert type(ours[0]["nullable_int"]) is np.float64
    assert type(ours[20]["nullable_int"]) is np.int64


@pytest.mark.grain
def test_read_options_reach_pyarrow_as_in_grain(typed_file: str) -> None:
    options = {"memory_map": True, "read_dictionary": ["text"]}
    ours = list(ParquetIterDataset(typed_file, **options))
    assert_rows_equal(ours, grain_rows(typed_file, **options))


@pytest.mark.grain
def test_several_files_are_interleaved_as_in_grain(many_files: list[str]) -> None:
    ours = list(ParquetIterDataset(many_files))
    assert len(ours) == sum((f * 7) % 10 for f in range(18))
    assert_rows_equal(ours, grain_rows(many_files))
    assert_rows_equal(list(ParquetIterDataset(many_files[:3])), grain_rows(many_files[:3]))
    assert_rows_equal(list(ParquetIterDataset(many_files[1:2])), grain_rows(many_files[1:2]))


def nan_as_array(row: dict[str, Any]) -> dict[str, Any]:
    """Float scalars as 0-d arrays, which `assert_resumable` compares with NaN == NaN."""
    return {k: np.asarray(v) if isinstance(v, np.floating) else v for k, v in row.items()}


@pytest.mark.slow
def test_resumes_after_any_row(typed_file: str, many_files: list[str]) -> None:
    assert_resumable(
        lambda: fn.map(nan_as_array, parquet(typed_file)),
        max_elements=TYPED_ROWS,
        resume_points=TYPED_ROWS + 1,
    )
    count = sum((f * 7) % 10 for f in range(18))
    assert_resumable(lambda: parquet(many_files), max_elements=count, resume_points=count + 1)


def test_the_state_is_the_row_group_and_the_row(tmp_path: Path) -> None:
    path = write(pa.table({"x": list(range(5))}), tmp_path / "x.parquet", 2)
    it = fn.iterate(parquet(path))
    states = [it.state] + [it.state for _ in it]
    assert states == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 1)]
    assert list(fn.iterate(parquet(path), ParquetPosition(1, 2))) == [{"x": 4}]
    assert list(fn.iterate(parquet(path), ParquetPosition(2, 1))) == []


def test_resuming_reads_only_the_row_group_it_starts_in(
    typed_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    original = pq.ParquetFile.read_row_group

    def spy(self: Any, i: int, *args: Any, **kwargs: Any) -> Any:
        read.append(i)
        return original(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    rows = list(itertools.islice(fn.iterate(parquet(typed_file), ParquetPosition(5, 3)), 6))
    assert [int(row["id"]) for row in rows] == list(range(38, 44))
    assert read == [5, 6]


def test_files_and_row_groups_without_rows(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64())])
    empty = str(tmp_path / "no_row_groups.parquet")
    pq.ParquetWriter(empty, schema).close()
    assert pq.ParquetFile(empty).num_row_groups == 0
    assert list(ParquetIterDataset(empty)) == []
    gaps = str(tmp_path / "gaps.parquet")
    with pq.ParquetWriter(gaps, schema) as writer:
        for values in ([], [1, 2], [], [], [3]):
            writer.write_table(pa.table({"x": values}, schema=schema))
    assert [int(row["x"]) for row in ParquetIterDataset(gaps)] == [1, 2, 3]
    assert_resumable(lambda: parquet(gaps), max_elements=3, resume_points=4)
    assert_resumable(lambda: parquet(empty), max_elements=1, resume_points=2)


def test_a_state_of_another_file_or_past_the_end_is_refused(
    typed_file: str, many_files: list[str]
) -> None:
    it = iter(ParquetIterDataset(typed_file))
    next(it)
    saved = it.get_state()
    other = iter(ParquetIterDataset(many_files[1]))
    with pytest.raises(ValueError, match="another pipeline"):
        other.set_state(saved)
    saved["state"]["row"] = 8
    with pytest.raises(ValueError, match="past the end of a row group of 7 rows"):
        iter(ParquetIterDataset(typed_file)).set_state(saved)
    saved["state"].update(row_group=9, row=0)
    with pytest.raises(ValueError, match="past the end of a file of 8 row groups"):
        iter(ParquetIterDataset(typed_file)).set_state(saved)


def test_missing_file_directory_and_other_formats_are_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.parquet")
    with pytest.raises(
        FileNotFoundError, match=r"Parquet file .*missing\.parquet.* does not exist"
    ):
        iter(ParquetIterDataset(missing))
    text = tmp_path / "notes.txt"
    text.write_text("not parquet at all")
    with pytest.raises(ValueError, match=r"notes\.txt' is not a readable Parquet file"):
        list(ParquetIterDataset(text))
    with pytest.raises(ValueError, match="is a directory, not a Parquet file"):
        iter(ParquetIterDataset(tmp_path))
    with pytest.raises(ValueError, match="empty sequence"):
        ParquetIterDataset([])
    with pytest.raises(TypeError, match=r"must be a str or os\.PathLike, got 3"):
        ParquetIterDataset(["a.parquet", 3])
    with pytest.raises(TypeError, match="rejects the read options"):
        iter(ParquetIterDataset(write(pa.table({"x": [1]}), tmp_path / "x.parquet", 1), bad=1))


def test_pickles_and_names_its_file_and_options(typed_file: str) -> None:
    ds = ParquetIterDataset(typed_file, memory_map=True).map(lambda row: int(row["id"]))
    copy = cloudpickle.loads(cloudpickle.dumps(ds))
    assert list(copy) == list(ds) == list(range(TYPED_ROWS))
    stream = parquet(typed_file, memory_map=True)
    assert stream.row_group_sizes == (7,) * 7 + (4,)
    assert pickle.loads(pickle.dumps(stream)) == stream
    assert repr(stream) == f"parquet({typed_file!r}, memory_map=True)"


def test_mp_prefetch_yields_the_same_with_and_without_workers(typed_file: str) -> None:
    rows = ParquetIterDataset(typed_file).map(lambda row: (int(row["id"]), row["text"]))
    numbers = grainfn.MapDataset.range(100).map(lambda x: (x * x, None)).to_iter_dataset()
    for ds in (rows, grainfn.IterDataset.mix([rows, numbers], [1, 2])):
        expected = list(ds)
        for workers in (0, 2):
            options = grainfn.MultiprocessingOptions(num_workers=workers)
            assert list(ds.mp_prefetch(options)) == expected


def test_import_grainfn_does_not_import_pyarrow_and_a_missing_one_says_what_to_install(
    typed_file: str,
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import grainfn, grainfn.experimental, grainfn.fn
        from grainfn.experimental import ParquetIterDataset
        assert "pyarrow" not in sys.modules, "import grainfn imported pyarrow"
        sys.modules["pyarrow"] = None  # as if it were not installed
        try:
            ParquetIterDataset({typed_file!r})
        except ImportError as error:
            print(error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert 'pip install "grainfn[parquet]"' in result.stdout
