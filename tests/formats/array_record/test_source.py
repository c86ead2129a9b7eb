"""ArrayRecordDataSource: reading, paths, errors, repr, pickling, closing and threads."""

from __future__ import annotations

import gc
import os
import pickle
import re
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn
from grainfn.sources import ArrayRecordDataSource, write_array_records

# ---------------------------------------------------------------------------
# Reading.


@pytest.mark.parametrize("fixture", ["one_shard", "three_shards"])
def test_len_getitem_getitems_and_iter_read_the_records_in_order(
    fixture: str, records: list[bytes], request: pytest.FixtureRequest
) -> None:
    paths = request.getfixturevalue(fixture)
    with ArrayRecordDataSource(paths) as source:
        assert len(source) == len(records)
        assert [source[i] for i in range(len(source))] == records
        assert source.__getitems__(range(len(source))) == records
        assert list(source) == records
        assert all(type(r) is bytes for r in source.__getitems__([0, 1]))


@settings(max_examples=30, deadline=None)
@given(indices=st.lists(st.integers(0, 202), max_size=70))
def test_getitems_returns_any_indices_in_the_order_asked(
    indices: list[int], three_shards: list[str], records: list[bytes]
) -> None:
    source = ArrayRecordDataSource(three_shards)
    expected = [records[i] for i in indices]
    assert source.__getitems__(indices) == expected
    assert source.__getitems__(np.asarray(indices, dtype=np.int64)) == expected
    assert source.__getitems__([np.int32(i) for i in indices]) == expected
    assert [source[i] for i in indices] == expected


def spy_on_readers(source: ArrayRecordDataSource) -> list[tuple[int, Any]]:
    """Makes `source` log every call to its readers as (file, (method, *args))."""
    calls: list[tuple[int, Any]] = []
    real = source._reader

    def spy(shard: int) -> Any:
        reader, lock = real(shard)

        class Reader:
            def seek(self, position: int) -> None:
                calls.append((shard, ("seek", position)))
                reader.seek(position)

            def read(self, *args: Any) -> Any:
                calls.append((shard, ("read", *args)))
                return reader.read(*args)

        return Reader(), lock

    source._reader = spy  # type: ignore[method-assign]
    return calls


def test_a_block_reads_each_file_once_and_single_indices_in_place(three_shards: list[str]) -> None:
    source = ArrayRecordDataSource(three_shards)
    calls = spy_on_readers(source)
    # Shards hold records [0, 68), [68, 136) and [136, 203).
    out = source.__getitems__([150, 3, 70, 1, 140, 69])
    assert out == [source[i] for i in (150, 3, 70, 1, 140, 69)]
    assert calls[:3] == [
        (0, ("read", [3, 1])),
        (1, ("read", [2, 1])),
        (2, ("read", [14, 4])),
    ]
    calls.clear()
    source.__getitems__([100, 5])  # one index per file: read in place, no batched read
    assert calls == [(0, ("seek", 5)), (0, ("read",)), (1, ("seek", 32)), (1, ("read",))]


def test_without_parallel_reads_a_block_is_read_in_place(
    three_shards: list[str], records: list[bytes]
) -> None:
    source = ArrayRecordDataSource(three_shards, parallel_reads=False)
    calls = spy_on_readers(source)
    assert source.__getitems__([150, 3, 1, 3]) == [records[i] for i in (150, 3, 1, 3)]
    assert calls == [
        (0, ("seek", 3)),
        (0, ("read",)),
        (0, ("seek", 1)),
        (0, ("read",)),
        (0, ("seek", 3)),
        (0, ("read",)),
        (2, ("seek", 14)),
        (2, ("read",)),
    ]
    assert source == ArrayRecordDataSource(three_shards)  # same records, same name
    assert repr(source) == repr(ArrayRecordDataSource(three_shards))
    shipped = pickle.dumps(ArrayRecordDataSource(three_shards, parallel_reads=False))
    assert pickle.loads(shipped)._parallel is False
    with pytest.raises(TypeError, match="parallel_reads must be True or False, got 1"):
        ArrayRecordDataSource(three_shards, parallel_reads=1)  # type: ignore[arg-type]


def test_shuffled_batches_of_a_pipeline_read_through_getitems(three_shards: list[str]) -> None:
    source = CountingSource(three_shards)
    ds = grainfn.MapDataset.source(source).seed(3).shuffle().batch(16)
    batches = list(ds)
    assert len(batches) == 13
    assert source.single == 0
    assert 1 <= len(source.blocks) <= 13
    assert sum(source.blocks) == 203
    flat = sorted(bytes(x) for batch in batches for x in batch)
    assert flat == sorted(ArrayRecordDataSource(three_shards))


class CountingSource(ArrayRecordDataSource):
    """Counts the single and the block reads a pipeline makes."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__(paths)
        self.single = 0
        self.blocks: list[int] = []

    def __getitem__(self, index: int) -> bytes:
        self.single += 1
        return super().__getitem__(index)

    def __getitems__(self, indices: Any) -> list[bytes]:
        self.blocks.append(len(indices))
        return super().__getitems__(indices)


def test_reader_options_are_passed_on_and_keep_the_records(
    three_shards: list[str], records: list[bytes]
) -> None:
    for options in (
        {"max_parallelism": "auto"},  # read-ahead threads: single reads go batched
        {"readahead_buffer_size": "64k", "max_parallelism": 2},
        {"index_storage_option": "offloaded", "footer_prefetch_bytes": 0},
    ):
        source = ArrayRecordDataSource(three_shards, reader_options=options)
        assert source.reader_options == {k: str(v) for k, v in options.items()}
        assert [source[i] for i in (0, 202, 100)] == [records[0], records[202], records[100]]
        assert source.__getitems__([5, 150, 6]) == [records[5], records[150], records[6]]


def test_files_without_records_are_skipped_over(tmp_path: Path) -> None:
    paths = write_array_records([b"x", b"y"], tmp_path / "sparse", num_shards=5)
    source = ArrayRecordDataSource(paths)
    assert len(source) == 2
    assert (source[0], source[1]) == (b"x", b"y")
    assert source.__getitems__([1, 0, 1]) == [b"y", b"x", b"y"]
    empty = ArrayRecordDataSource(paths[2:])
    assert len(empty) == 0
    assert empty.__getitems__([]) == []
    with pytest.raises(IndexError, match=r"index 0 is out of range .* which has 0 records"):
        empty[0]


# ---------------------------------------------------------------------------
# Paths.


def test_paths_may_be_one_path_a_list_a_pathlike_or_a_glob(
    three_shards: list[str], records: list[bytes]
) -> None:
    folder = Path(three_shards[0]).parent
    as_list = ArrayRecordDataSource(three_shards)
    as_glob = ArrayRecordDataSource(str(folder / "data-*-of-00003.array_record"))
    as_paths = ArrayRecordDataSource([Path(p) for p in three_shards])
    mixed = ArrayRecordDataSource([three_shards[0], folder / "data-0000[12]-*"])
    for source in (as_list, as_glob, as_paths, mixed):
        assert source.paths == tuple(three_shards)
        assert source.__getitems__(range(203)) == records
    single = ArrayRecordDataSource(Path(three_shards[1]))
    assert single.paths == (three_shards[1],)
    assert list(single) == records[68:136]


def test_files_are_read_in_the_order_given_and_a_glob_sorted(
    three_shards: list[str], records: list[bytes]
) -> None:
    backwards = ArrayRecordDataSource(three_shards[::-1])
    assert list(backwards) == records[136:] + records[68:136] + records[:68]
    twice = ArrayRecordDataSource([three_shards[0], three_shards[0]])
    assert list(twice) == records[:68] * 2


def test_relative_paths_keep_working_after_a_chdir(
    three_shards: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(three_shards[0]).parent
    monkeypatch.chdir(folder)
    source = ArrayRecordDataSource("data-*.array_record")
    assert source.paths[0] == "data-00000-of-00003.array_record"
    monkeypatch.chdir(tmp_path)
    assert source[202] == ArrayRecordDataSource(three_shards)[202]


# ---------------------------------------------------------------------------
# Errors.


def test_bad_paths_are_refused_with_what_to_do(tmp_path: Path, three_shards: list[str]) -> None:
    missing = str(tmp_path / "missing.array_record")
    with pytest.raises(FileNotFoundError, match=f"{re.escape(repr(missing))} does not exist"):
        ArrayRecordDataSource(missing)
    with pytest.raises(FileNotFoundError, match=r"does not exist\. Pass an ArrayRecord file"):
        ArrayRecordDataSource([three_shards[0], missing])
    pattern = str(tmp_path / "nothing-*.array_record")
    with pytest.raises(FileNotFoundError, match=f"pattern {re.escape(repr(pattern))} matches no"):
        ArrayRecordDataSource(pattern)
    with pytest.raises(ValueError, match=r"is a directory, not an ArrayRecord file\. Pass"):
        ArrayRecordDataSource(tmp_path)
    with pytest.raises(ValueError, match="paths is an empty sequence"):
        ArrayRecordDataSource([])
    with pytest.raises(TypeError, match=r"paths must be a path .* got 3 of type int"):
        ArrayRecordDataSource(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"paths\[1\] must be a path .* got None"):
        ArrayRecordDataSource([three_shards[0], None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"paths must be a path .* of type bytes"):
        ArrayRecordDataSource(os.fsencode(three_shards[0]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "at least 64KB"),
        (b"not an array record" * 10, "at least 64KB"),
        (bytes(range(256)) * 400, "Corrupted|Failed to read"),
    ],
)
def test_files_that_are_not_array_record_files_are_refused(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "corrupt.array_record"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{re.escape(repr(str(path)))} is not a readable") as info:
        ArrayRecordDataSource(path)
    assert re.search(problem, str(info.value))
    assert "written completely by an ArrayRecord writer" in str(info.value)


def test_bad_indices_name_the_index_and_the_length(three_shards: list[str]) -> None:
    source = ArrayRecordDataSource(three_shards)
    for index in (-1, 203, 10**20):
        with pytest.raises(IndexError, match=f"index {index} is out of range for .*which has 203 "):
            source[index]
    with pytest.raises(IndexError, match=r"index 203 is out of range .* 0 <= index < 203"):
        source.__getitems__([0, 203, 5])
    with pytest.raises(IndexError, match="index -2 is out of range"):
        source.__getitems__(np.array([4, -2]))
    with pytest.raises(TypeError, match=r"index must be an integer, got 1\.5 of type float"):
        source[1.5]  # type: ignore[index]
    with pytest.raises(TypeError, match="index must be an integer, got True"):
        source[True]
    with pytest.raises(TypeError, match="indices must be a sequence of integers"):
        source.__getitems__(["a"])  # type: ignore[list-item]


def test_bad_reader_options_are_refused(three_shards: list[str]) -> None:
    with pytest.raises(ValueError, match=r"rejects the reader options .*Unknown option colour"):
        ArrayRecordDataSource(three_shards, {"colour": "red"})
    with pytest.raises(ValueError, match="max_parallelism: invalid value: lots"):
        ArrayRecordDataSource(three_shards, {"max_parallelism": "lots"})
    with pytest.raises(TypeError, match="reader_options must be None or a dict"):
        ArrayRecordDataSource(three_shards, "max_parallelism:1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"reader_options\['max_parallelism'\] must be a string"):
        ArrayRecordDataSource(three_shards, {"max_parallelism": 1.0})
    with pytest.raises(ValueError, match="without ',' or ':', got '1,x:2'"):
        ArrayRecordDataSource(three_shards, {"max_parallelism": "1,x:2"})
    with pytest.raises(ValueError, match="keys must be array_record option names"):
        ArrayRecordDataSource(three_shards, {"Max Parallelism": 1})


def test_a_file_changed_after_the_source_was_made_is_an_error(tmp_path: Path) -> None:
    paths = write_array_records([b"a", b"b", b"c"], tmp_path / "changing")
    source = ArrayRecordDataSource(paths)
    shipped = pickle.dumps(source)
    write_array_records([b"a", b"b"], tmp_path / "changing")
    with pytest.raises(ValueError, match="has changed since this source was made: it had 3 "):
        pickle.loads(shipped)[0]


def test_a_read_that_fails_names_the_file_and_the_next_read_reopens_it(tmp_path: Path) -> None:
    records = [np.random.default_rng(i).bytes(3000) for i in range(50)]  # incompressible
    paths = write_array_records(records, tmp_path / "flaky")
    source = ArrayRecordDataSource(paths, parallel_reads=False)
    assert source[40] == records[40]
    intact = Path(paths[0]).read_bytes()
    Path(paths[0]).write_bytes(intact[:100] + bytes(20_000) + intact[20_100:])  # records 0-6
    with pytest.raises(OSError, match=r"Reading ArrayRecord file .*flaky-00000-of-00001.* failed"):
        source[3]
    with pytest.raises(OSError, match="Corrupted"):
        source.__getitems__([4, 5])
    assert source[45] == records[45]  # a new reader: the failed one stays failed
    Path(paths[0]).write_bytes(intact)
    assert source.__getitems__([4, 3]) == [records[4], records[3]]


# ---------------------------------------------------------------------------
# Naming, pickling, closing.


def test_repr_names_the_files_and_options_stably(three_shards: list[str]) -> None:
    a = ArrayRecordDataSource(three_shards)
    b = ArrayRecordDataSource(list(three_shards))
    assert repr(a) == repr(b) == f"ArrayRecordDataSource({list(three_shards)!r})"
    assert a == b and hash(a) == hash(b)
    single = ArrayRecordDataSource(three_shards[0], {"max_parallelism": 1})
    assert repr(single) == (
        f"ArrayRecordDataSource({three_shards[0]!r}, reader_options={{'max_parallelism': '1'}})"
    )
    assert single != ArrayRecordDataSource(three_shards[0])
    assert "0x" not in repr(a) + repr(single)


def test_many_files_are_summarised_in_the_repr(tmp_path: Path) -> None:
    paths = write_array_records([b"r"] * 8, tmp_path / "many", num_shards=8)
    text = repr(ArrayRecordDataSource(paths))
    assert text.startswith(f"ArrayRecordDataSource([{paths[0]!r}, {paths[1]!r}, ..., {paths[7]!r}]")
    assert re.search(r"\(8 files, sha256 [0-9a-f]{12}\)\)$", text)
    other = repr(ArrayRecordDataSource([*paths[:3], paths[4], paths[3], *paths[5:]]))
    assert other != text  # the digest covers the files in the middle and their order


def test_the_pipeline_description_names_the_files(three_shards: list[str]) -> None:
    ds = grainfn.MapDataset.source(ArrayRecordDataSource(three_shards)).seed(3).shuffle()
    lines = repr(ds).splitlines()
    assert lines[-1].strip() == (
        f"source(ArrayRecordDataSource({list(three_shards)!r}), length 203)  [length 203]"
    )


def test_pickles_without_readers_and_reads_after(three_shards: list[str]) -> None:
    source = ArrayRecordDataSource(three_shards)
    fresh = pickle.dumps(source)
    source.__getitems__([0, 100, 200])  # opens all three readers
    used = pickle.dumps(source)
    assert len(used) == len(fresh) < 2000
    copy = pickle.loads(used)
    assert copy == source and repr(copy) == repr(source)
    assert copy._readers == [None, None, None]
    assert copy.__getitems__([202, 0]) == source.__getitems__([202, 0])


def test_close_releases_readers_and_reading_again_reopens(three_shards: list[str]) -> None:
    source = ArrayRecordDataSource(three_shards)
    first = source[150]
    assert source._readers[2] is not None
    source.close()
    source.close()  # twice is fine
    assert source._readers == [None, None, None]
    assert source[150] == first
    with source as same:
        assert same is source and same[0] == source[0]
    assert source._readers == [None, None, None]


@pytest.mark.slow
def test_a_dropped_source_closes_its_readers_quietly(three_shards: list[str]) -> None:
    source = ArrayRecordDataSource(three_shards)
    source.__getitems__([1, 100, 150])
    reader = source._readers[0]
    assert reader is not None
    del source
    gc.collect()
    with pytest.raises(RuntimeError, match="closed"):
        reader[0].read([0])
    half_built = ArrayRecordDataSource.__new__(ArrayRecordDataSource)
    del half_built  # __del__ of a source whose __init__ never ran does not raise
    gc.collect()


def test_threads_reading_one_source_get_the_right_records(
    three_shards: list[str], records: list[bytes]
) -> None:
    source = ArrayRecordDataSource(three_shards)
    rng = np.random.default_rng(0)
    jobs = [rng.integers(0, 203, size=int(rng.integers(1, 40))).tolist() for _ in range(200)]

    def read(job: list[int]) -> bool:
        if len(job) % 2:
            return [source[i] for i in job] == [records[i] for i in job]
        return source.__getitems__(job) == [records[i] for i in job]

    with futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, jobs))
