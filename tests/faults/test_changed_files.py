"""A saved state never restores silently into files that changed since it was saved.

A state of a pipeline that reads ArrayRecord, Parquet or TFRecord files
records each file's size and a digest of its first and last 4 KiB under
`"files"`. Restoring into the same files continues exactly; into a file
rewritten with the same number of records, or a Parquet file of another
schema, it is refused with a ValueError naming the file. A state without
`"files"` (written before grainfn recorded them) restores as before. The
fingerprints are taken once per iterator: `get_state()` reads no file.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grainfn as grain
from grainfn import fn
from grainfn.experimental import ParquetIterDataset, TFRecordIterDataset
from grainfn.sources import ArrayRecordDataSource, write_array_records

N = 12
"""Records per file."""


def _records(tag: str, n: int = N) -> list[bytes]:
    return [f"{tag}{i:03d}".encode() for i in range(n)]


# --- One case per format: how to write its files, and a pipeline over them. ---


class ArrayRecordCase:
    name = "array_record"

    def write(self, folder: Path, tag: str) -> list[str]:
        records = _records(f"{tag}0") + _records(f"{tag}1")
        return write_array_records(records, folder / "data", num_shards=2)

    def rewrite_same_count(self, path: str) -> None:
        # Same count, same sizes, other bytes, moved over the old file.
        (written,) = write_array_records(_records("z0"), os.path.dirname(path) + "/new")
        os.replace(written, path)

    def facade(self, paths: list[str]) -> Any:
        return grain.MapDataset.source(ArrayRecordDataSource(paths)).to_iter_dataset()

    def stream(self, paths: list[str]) -> Any:
        return fn.from_dataset(fn.source(ArrayRecordDataSource(paths)))


class ParquetCase:
    name = "parquet"

    def write(self, folder: Path, tag: str) -> list[str]:
        paths = [str(folder / "a.parquet"), str(folder / "b.parquet")]
        for k, path in enumerate(paths):
            pq.write_table(pa.table({"x": [f"{tag}{k}{i:03d}" for i in range(N)]}), path)
        return paths

    def rewrite_same_count(self, path: str) -> None:
        pq.write_table(pa.table({"x": [f"z0{i:03d}" for i in range(N)]}), path)

    def facade(self, paths: list[str]) -> Any:
        return ParquetIterDataset(paths)

    def stream(self, paths: list[str]) -> Any:
        return fn.parquet(paths)


class TFRecordCase:
    name = "tfrecord"

    def write(self, folder: Path, tag: str) -> list[str]:
        return [fn.write_tfrecords(str(folder / "x.tfrecord"), _records(tag))]

    def rewrite_same_count(self, path: str) -> None:
        fn.write_tfrecords(path, _records("z"))

    def facade(self, paths: list[str]) -> Any:
        return TFRecordIterDataset(paths[0])

    def stream(self, paths: list[str]) -> Any:
        return fn.tfrecord(paths[0])


CASES = [ArrayRecordCase(), ParquetCase(), TFRecordCase()]


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
def case(request: pytest.FixtureRequest) -> Any:
    return request.param


# --- Two ways to save and restore: the facade iterator, and fn's state dicts. ---


def facade_save(case: Any, paths: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """Reads 5 elements through the facade: the state then, and the rest."""
    it = iter(case.facade(paths))
    for _ in range(5):
        next(it)
    return it.get_state(), list(it)


def facade_restore(case: Any, paths: list[str], state: dict[str, Any]) -> list[Any]:
    it = iter(case.facade(paths))
    it.set_state(state)
    return list(it)


def fn_save(case: Any, paths: list[str]) -> tuple[dict[str, Any], list[Any]]:
    stream = case.stream(paths)
    it = fn.iterate(stream)
    for _ in range(5):
        next(it)
    return fn.state_to_dict(stream, it.state), list(it)


def fn_restore(case: Any, paths: list[str], state: dict[str, Any]) -> list[Any]:
    stream = case.stream(paths)
    return list(fn.iterate(stream, fn.state_from_dict(stream, state)))


WAYS = {"facade": (facade_save, facade_restore), "fn": (fn_save, fn_restore)}


@pytest.fixture(params=sorted(WAYS))
def way(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], Callable[..., Any]]:
    return WAYS[request.param]


def test_the_state_names_every_file(case: Any, way: Any, tmp_path: Path) -> None:
    save, _ = way
    paths = case.write(tmp_path, "a")
    state, _ = save(case, paths)
    assert sorted(state["files"]) == sorted(paths)
    for value in state["files"].values():
        size, _, digest = value.partition(":")
        assert int(size) > 0 and len(digest) == 32


def test_unchanged_files_restore_exactly(case: Any, way: Any, tmp_path: Path) -> None:
    save, restore = way
    paths = case.write(tmp_path, "a")
    state, rest = save(case, paths)
    assert rest  # something is left to continue with
    assert restore(case, paths, copy.deepcopy(state)) == rest


def test_a_file_rewritten_with_as_many_records_is_refused(
    case: Any, way: Any, tmp_path: Path
) -> None:
    save, restore = way
    paths = case.write(tmp_path, "a")
    state, _ = save(case, paths)
    case.rewrite_same_count(paths[0])
    with pytest.raises(ValueError, match="has changed since the state was saved") as info:
        restore(case, paths, state)
    message = str(info.value)
    assert repr(paths[0]) in message
    assert "Restore with the files the checkpoint was written with" in message
    if len(paths) > 1:
        assert repr(paths[1]) not in message  # only the changed file is named


def test_same_size_other_content_says_so(tmp_path: Path) -> None:
    case = ArrayRecordCase()
    paths = case.write(tmp_path, "a")
    size = os.path.getsize(paths[0])
    state, _ = facade_save(case, paths)
    case.rewrite_same_count(paths[0])
    assert os.path.getsize(paths[0]) == size
    with pytest.raises(ValueError, match=r"the same size .* content at its start or end"):
        facade_restore(case, paths, state)


def test_the_iterator_that_saved_refuses_too(case: Any, tmp_path: Path) -> None:
    """Its own fingerprints, taken before the change, are not what it compares with."""
    paths = case.write(tmp_path, "a")
    it = iter(case.facade(paths))
    next(it)
    state = it.get_state()
    case.rewrite_same_count(paths[-1])
    with pytest.raises(ValueError, match=repr(paths[-1])):
        it.set_state(state)


def test_a_parquet_file_of_another_schema_is_refused(way: Any, tmp_path: Path) -> None:
    save, restore = way
    case = ParquetCase()
    paths = case.write(tmp_path, "a")
    state, _ = save(case, paths)
    pq.write_table(pa.table({"y": list(range(N)), "z": [0.5] * N}), paths[1])
    with pytest.raises(ValueError, match=f"File {paths[1]!r} has changed") as info:
        restore(case, paths, state)
    assert "bytes, now" in str(info.value)  # another size


def test_a_missing_file_is_named(case: Any, tmp_path: Path) -> None:
    """Not by the fingerprints: reading it fails, and the format's own error names it."""
    paths = case.write(tmp_path, "a")
    state, _ = facade_save(case, paths)
    it = iter(case.facade(paths))  # built while the file is there
    os.remove(paths[0])
    with pytest.raises((OSError, ValueError)) as info:
        it.set_state(state)
        next(it)
    assert paths[0] in str(info.value)


def test_a_state_without_files_restores_as_before(case: Any, way: Any, tmp_path: Path) -> None:
    save, restore = way
    paths = case.write(tmp_path, "a")
    state, rest = save(case, paths)
    del state["files"]
    assert restore(case, paths, state) == rest


def test_a_malformed_files_entry_is_refused(case: Any, tmp_path: Path) -> None:
    paths = case.write(tmp_path, "a")
    state, _ = facade_save(case, paths)
    state["files"] = ["not", "a", "dict"]
    with pytest.raises(ValueError, match="State dict field 'files' must map file names"):
        facade_restore(case, paths, state)


def test_get_state_reads_no_file(case: Any, tmp_path: Path) -> None:
    """The fingerprints are taken once: after the files are gone, get_state is unchanged."""
    paths = case.write(tmp_path, "a")
    it = iter(case.facade(paths))
    next(it)
    before = it.get_state()
    for path in paths:
        os.remove(path)
    assert it.get_state() == before
    assert sorted(before["files"]) == sorted(paths)


def test_a_pipeline_without_files_records_none() -> None:
    it = iter(grain.MapDataset.range(5).shuffle(seed=1).to_iter_dataset())
    next(it)
    assert "files" not in it.get_state()


def test_files_are_found_through_mixing_and_batching(tmp_path: Path) -> None:
    """Every file of every branch is fingerprinted, and a change in any branch is refused."""
    records = ArrayRecordCase().write(tmp_path, "a")
    parquet_files = ParquetCase().write(tmp_path, "p")
    records_ds = grain.MapDataset.source(ArrayRecordDataSource(records)).to_iter_dataset()
    parquet_ds = ParquetIterDataset(parquet_files).map(lambda row: row["x"].encode())
    mixed = grain.IterDataset.mix([records_ds, parquet_ds], [0.5, 0.5]).batch(2)
    it = iter(mixed)
    next(it)
    state = it.get_state()
    assert sorted(state["files"]) == sorted(records + parquet_files)
    ParquetCase().rewrite_same_count(parquet_files[1])
    with pytest.raises(ValueError, match=repr(parquet_files[1])):
        it.set_state(state)
