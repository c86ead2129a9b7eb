"""Opening ArrayRecord readers: the options that serve random access, and clear errors.

The defaults are the two settings array_record documents for random access:

- `readahead_buffer_size:0`: read only the chunk that holds a record, not the
  16 MB after it (read-ahead serves sequential scans);
- `max_parallelism:0`: no background read-ahead threads. A single record can
  then be read in the calling thread with `seek` + `read`, in a few
  microseconds; a one-index batched read costs several times more, and its
  cost grows with the file (array_record goes through the file's whole chunk
  list on every batched read). Batched reads by indices still fetch their
  chunks on array_record's thread pool.

Options given by the user are added after the defaults and override them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from concurrent import futures
from types import MappingProxyType
from typing import Any

from grainfn._src.core import file_kinds

DEFAULT_READER_OPTIONS: Mapping[str, str] = MappingProxyType(
    {"readahead_buffer_size": "0", "max_parallelism": "0"}
)
"""The reader options every source starts from (see the module docstring)."""

_OPTION_NAME = re.compile(r"[a-z][a-z0-9_]*")
_COUNTING_THREADS = 16


def check_reader_options(reader_options: Any) -> dict[str, str]:
    """`reader_options` as a dict of option names to string values, checked.

    Args:
        reader_options: None, or a mapping from array_record reader option
            names to values (strings or integers), as in Grain.

    Raises:
        TypeError: if it is not a mapping of names to strings or integers.
        ValueError: if a name or value cannot be written in an options string.

    Examples:
        >>> check_reader_options({"index_storage_option": "offloaded", "footer_prefetch_bytes": 0})
        {'index_storage_option': 'offloaded', 'footer_prefetch_bytes': '0'}
    """
    if reader_options is None:
        return {}
    if not isinstance(reader_options, Mapping):
        raise TypeError(
            f"reader_options must be None or a dict of option names to values, such as "
            f"{{'index_storage_option': 'offloaded'}}, got {reader_options!r} of type "
            f"{type(reader_options).__name__}."
        )
    checked = {}
    for name, value in reader_options.items():
        if not isinstance(name, str) or not _OPTION_NAME.fullmatch(name):
            raise ValueError(
                f"reader_options keys must be array_record option names such as "
                f"'max_parallelism' (lower case letters, digits and '_'), got {name!r}."
            )
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(
                f"reader_options[{name!r}] must be a string or an integer, got {value!r} of "
                f"type {type(value).__name__}."
            )
        text = str(value)
        if not text or "," in text or ":" in text:
            raise ValueError(
                f"reader_options[{name!r}] must be a non-empty value without ',' or ':', "
                f"got {text!r}."
            )
        checked[name] = text
    return checked


def merged_options(user_options: Mapping[str, str]) -> dict[str, str]:
    """The defaults with `user_options` on top, in that order."""
    return {**DEFAULT_READER_OPTIONS, **user_options}


def options_string(user_options: Mapping[str, str]) -> str:
    """The options string array_record's reader takes, defaults first.

    Examples:
        >>> options_string({"max_parallelism": "auto"})
        'readahead_buffer_size:0,max_parallelism:auto'
    """
    return ",".join(f"{name}:{value}" for name, value in merged_options(user_options).items())


def reads_in_place(user_options: Mapping[str, str]) -> bool:
    """Whether a single record is best read with `seek` + `read` in the calling thread.

    True when read-ahead is off (the default). With read-ahead on, `read()`
    would fill a read-ahead buffer (and start threads) for every record, so a
    one-index batched read is used instead.
    """
    merged = merged_options(user_options)
    return merged["readahead_buffer_size"] == "0" and merged["max_parallelism"] == "0"


def open_reader(path: str, options: str) -> Any:
    """An open `array_record` reader of `path`, or an error that says what is wrong.

    `path` is checked to be a regular file first (one `os.stat`), so that no
    FIFO or device reaches array_record's open, which would block on it.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: if `path` is a directory, a FIFO, a device or anything
            else but a regular file, or not an ArrayRecord file, or if
            array_record rejects `options`.
    """
    from array_record.python import array_record_module

    try:
        file_kinds.check_regular_file(path, "ArrayRecord")
    except FileNotFoundError:
        raise FileNotFoundError(f"ArrayRecord file {path!r} does not exist (any more).") from None
    try:
        reader = array_record_module.ArrayRecordReader(path, options)
    except ValueError as error:
        raise ValueError(
            f"array_record rejects the reader options {options!r}: {error}. Fix or remove "
            f"the entry of reader_options it names."
        ) from None
    if reader.ok():
        return reader
    problem = _failure(reader)
    if not os.path.exists(path):
        raise FileNotFoundError(f"ArrayRecord file {path!r} does not exist (any more).")
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a directory, not an ArrayRecord file.")
    raise ValueError(
        f"{path!r} is not a readable ArrayRecord file ({problem}). Check that it was written "
        f"completely by an ArrayRecord writer (for example grainfn.sources.write_array_records) "
        f"and pass only such files."
    )


def _failure(reader: Any) -> str:
    """The message of a reader that failed to open (closing it raises it)."""
    try:
        reader.close()
    except RuntimeError as error:
        return str(error)
    return "unknown error"


def count_records(files: Sequence[str], options: str) -> list[int]:
    """The number of records of each file, opening (and closing) each once.

    Many files are opened on a few threads, as array_record releases the GIL
    while it reads a file's footer.
    """

    def count(path: str) -> int:
        reader = open_reader(path, options)
        try:
            return int(reader.num_records())
        finally:
            reader.close()

    if len(files) <= 2:
        return [count(path) for path in files]
    with futures.ThreadPoolExecutor(min(_COUNTING_THREADS, len(files))) as pool:
        return list(pool.map(count, files))
