"""Opening ArrayRecord readers: checked options, defaults for random access, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grainfn._src.formats.array_record.reader import (
    DEFAULT_READER_OPTIONS,
    check_reader_options,
    count_records,
    merged_options,
    open_reader,
    options_string,
    reads_in_place,
)


def test_options_are_names_to_strings_and_none_is_no_options() -> None:
    assert check_reader_options(None) == {}
    assert check_reader_options({"max_parallelism": 2, "x_1": "a"}) == {
        "max_parallelism": "2",
        "x_1": "a",
    }


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ("max_parallelism:1", TypeError, "reader_options must be None or a dict"),
        ({"Max": "1"}, ValueError, "reader_options keys must be array_record option names"),
        ({1: "1"}, ValueError, "got 1"),
        ({"a": True}, TypeError, r"reader_options\['a'\] must be a string or an integer, got True"),
        ({"a": 1.5}, TypeError, "of type float"),
        ({"a": ""}, ValueError, "must be a non-empty value without ',' or ':', got ''"),
        ({"a": "1,b:2"}, ValueError, "got '1,b:2'"),
    ],
)
def test_options_that_cannot_be_written_are_refused(
    options: object, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        check_reader_options(options)


def test_the_users_options_come_after_the_defaults_and_override_them() -> None:
    assert merged_options({}) == dict(DEFAULT_READER_OPTIONS)
    assert merged_options({"max_parallelism": "4", "a": "b"}) == {
        "readahead_buffer_size": "0",
        "max_parallelism": "4",
        "a": "b",
    }
    assert options_string({}) == "readahead_buffer_size:0,max_parallelism:0"
    assert options_string({"a": "b"}) == "readahead_buffer_size:0,max_parallelism:0,a:b"


def test_a_record_is_read_in_place_only_without_read_ahead() -> None:
    assert reads_in_place({})
    assert reads_in_place({"index_storage_option": "offloaded"})
    assert not reads_in_place({"max_parallelism": "1"})
    assert not reads_in_place({"readahead_buffer_size": "1024"})


def test_count_records_opens_each_file_once(three_shards: list[str], one_shard: list[str]) -> None:
    options = options_string({})
    assert count_records(three_shards, options) == [68, 68, 67]
    assert count_records(one_shard * 3, options) == [203] * 3  # (read on threads)
    assert count_records([], options) == []


def test_an_open_reader_reads_the_records(one_shard: list[str], records: list[bytes]) -> None:
    reader = open_reader(one_shard[0], options_string({}))
    try:
        assert reader.num_records() == len(records)
        assert reader.read([5, 0]) == [records[5], records[0]]
    finally:
        reader.close()


def test_what_is_not_a_readable_file_is_named(tmp_path: Path, one_shard: list[str]) -> None:
    options = options_string({})
    missing = str(tmp_path / "gone.array_record")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_reader(missing, options)
    with pytest.raises(ValueError, match="directory"):
        open_reader(str(tmp_path), options)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="fifo"):
        open_reader(str(fifo), options)
    junk = tmp_path / "junk.array_record"
    junk.write_bytes(b"not an array record file" * 10)
    with pytest.raises(ValueError, match="is not a readable ArrayRecord file"):
        open_reader(str(junk), options)
    with pytest.raises(ValueError, match="array_record rejects the reader options"):
        open_reader(one_shard[0], "no_such_option:1")
