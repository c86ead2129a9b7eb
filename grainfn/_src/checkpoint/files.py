"""The iterator state file of one JAX process: its name, writing it, and reading it back.

A checkpoint of an iterator is a directory holding one JSON file per JAX
process, `process_<index>-of-<count>.json`, as Grain writes it. Two kinds of
iterator are served, told apart by what their `get_state()` returns:

- a dict (grainfn's and Grain's `DatasetIterator`): the file is its JSON, and
  `set_state` receives the parsed dict;
- bytes of a JSON object (a `DataLoader` iterator): the file is those bytes as
  text, and `set_state` receives the file's bytes.

A file that is missing, empty, truncated, not JSON, or the state of another
pipeline is refused with a ValueError naming the file and the problem.

Nothing is lost and nothing hangs: every state file is written atomically,
and read only if it is a small regular file (see `file_io`).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any, NamedTuple, Protocol

from grainfn._src.checkpoint.file_io import (
    check_inside,
    excerpt,
    listing,
    read_state_bytes,
    write_atomically,
)


class StatefulIterator(Protocol):
    """What checkpointing needs of an iterator: Grain's `get_state` and `set_state`."""

    def get_state(self) -> Any:
        """The position as a JSON-able dict, or as JSON bytes."""

    def set_state(self, state: Any) -> None:
        """Continues from a state `get_state` returned."""


class StateFile(NamedTuple):
    """A state file read and parsed: where it is, its text, and its JSON object."""

    path: Any
    text: str
    data: dict[str, Any]


def current_process() -> tuple[int, int]:
    """This process's `(jax.process_index(), jax.process_count())`."""
    import jax  # heavy: imported where a checkpoint is written or read, not with grainfn

    return jax.process_index(), jax.process_count()


def state_file_name(process_index: int, process_count: int) -> str:
    """The name of the state file of one process of `process_count`.

    Examples:
        >>> state_file_name(0, 1)
        'process_0-of-1.json'
    """
    if not 0 <= process_index < process_count:
        raise ValueError(
            f"process_index must be in [0, process_count), got {process_index} of {process_count}."
        )
    return f"process_{process_index}-of-{process_count}.json"


def as_path(directory: Any) -> Any:
    """`directory` as a path object: strings and `os.PathLike`s become `pathlib.Path`s.

    Orbax's `epath.Path` (local or remote) is kept as it is.
    """
    if isinstance(directory, str):
        return pathlib.Path(directory)
    if hasattr(directory, "read_text") and hasattr(directory, "__truediv__"):
        return directory
    if isinstance(directory, os.PathLike):
        return pathlib.Path(directory)
    raise TypeError(
        f"A checkpoint directory must be a path or a string, got {type(directory).__name__}."
    )


def state_json(state: Any) -> str:
    """The file text of a `get_state()` value: a dict as indented JSON, JSON bytes as they are.

    Raises:
        TypeError: if `state` is neither, or the dict is not JSON-able.
        ValueError: if the bytes are not UTF-8 JSON of an object.

    Examples:
        >>> print(state_json({"version": 1}))
        {
          "version": 1
        }
        >>> state_json(b'{"version": 1}')
        '{"version": 1}'
    """
    if isinstance(state, dict):
        try:
            return json.dumps(state, indent=2)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"The iterator's get_state() returned a dict that is not JSON-able ({error}); "
                "a checkpointable state holds only dicts, lists, strings, numbers and bools."
            ) from error
    if isinstance(state, (bytes, bytearray)):
        try:
            text = bytes(state).decode("utf-8")
            parsed = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(
                f"The iterator's get_state() returned bytes that are not UTF-8 JSON ({error}); "
                "a DataLoader iterator's state must be the JSON of a dict."
            ) from error
        if not isinstance(parsed, dict):
            raise ValueError(
                "The iterator's get_state() returned the JSON of a "
                f"{type(parsed).__name__}; a state must be the JSON of a dict."
            )
        return text
    raise TypeError(
        f"The iterator's get_state() returned a {type(state).__name__}; checkpointing serves "
        "iterators whose state is a dict (DatasetIterator) or JSON bytes (DataLoader)."
    )


def write_state(directory: Any, state: Any, process: tuple[int, int] | None = None) -> Any:
    """Writes a `get_state()` value to this process's file in `directory`; returns the file's path.

    The file is replaced atomically (see `write_atomically`): if the write
    fails, the file that was there before is left as it was.

    Args:
        directory: An existing directory.
        state: What the iterator's `get_state()` returned (a dict, or JSON bytes).
        process: `(index, count)` of the writing process; default: JAX's.
    """
    text = state_json(state)
    path = as_path(directory) / state_file_name(*(process or current_process()))
    write_atomically(path, text.encode("utf-8"))
    return path


def read_state(directory: Any, process: tuple[int, int] | None = None) -> StateFile:
    """Reads this process's state file in `directory`, refusing a missing or corrupt one.

    Args:
        directory: A directory an iterator's state was saved to.
        process: `(index, count)` of the reading process; default: JAX's.

    Raises:
        ValueError: naming the file and what is wrong with it: missing (with the
            files that are there), not a regular file (a FIFO, a device, a
            directory), larger than `STATE_FILE_LIMIT`, empty, truncated, not
            UTF-8, not JSON, or not a JSON object.
    """
    index, count = process or current_process()
    directory = as_path(directory)
    path = directory / state_file_name(index, count)
    check_inside(path, directory)
    try:
        raw = read_state_bytes(path)
    except FileNotFoundError:
        raise ValueError(_missing_file_message(directory, path, index, count)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"Iterator state file {path} is corrupt: it is not UTF-8 text (byte "
            f"{raw[error.start]:#04x} at offset {error.start}: {error.reason}). It reads there: "
            f'"{excerpt(raw, error.start)}". Restore an earlier checkpoint.'
        ) from error
    if not text.strip():
        raise ValueError(
            f"Iterator state file {path} is empty: the save that wrote it did not finish. "
            "Restore an earlier checkpoint."
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(_bad_json_message(path, text, error)) from error
    if not isinstance(data, dict):
        raise ValueError(
            f"Iterator state file {path} holds a JSON {type(data).__name__}, not the object "
            "an iterator's get_state() writes. Is it a state file of this iterator?"
        )
    return StateFile(path, text, data)


def read_all_states(directory: Any) -> list[StateFile]:
    """Reads every process's state file in `directory` (any process count), in name order.

    An elastic iterator restores from the files of all the processes that
    saved, whatever their number (see `restore`).

    Raises:
        ValueError: if there is no state file, or one is corrupt (see `read_state`).
    """
    directory = as_path(directory)
    found = []
    if directory.exists():
        for path in directory.iterdir():
            match = _STATE_FILE.fullmatch(path.name)
            if match:
                found.append((int(match["count"]), int(match["index"])))
    if not found:
        names = sorted(p.name for p in directory.iterdir()) if directory.exists() else []
        holds = f"it holds {listing(names)}" if names else "it is empty or does not exist"
        raise ValueError(
            f"No iterator state file (process_<index>-of-<count>.json) is in {directory}: "
            f"{holds}. Pass the directory the iterator was saved to."
        )
    return [read_state(directory, (index, count)) for count, index in sorted(found)]


def restore(iterator: StatefulIterator, directory: Any) -> None:
    """Sets `iterator` to the state saved in `directory`.

    An iterator with `set_state_from_files` (an elastic one, whose state is
    spread over the files of however many processes saved it) receives every
    process's file; any other gets this process's file (see `set_state_from`).
    """
    from_files = getattr(iterator, "set_state_from_files", None)
    if callable(from_files):
        from_files(read_all_states(directory))
    else:
        set_state_from(iterator, read_state(directory))


_STATE_FILE = re.compile(r"process_(?P<index>\d+)-of-(?P<count>\d+)\.json")


def set_state_from(iterator: StatefulIterator, loaded: StateFile) -> None:
    """Sets `iterator` to the state of `loaded`, in the form its `get_state()` returns.

    A refusal of `set_state` (another pipeline, version or layout) is re-raised
    as a ValueError that names the file and keeps the iterator's message.
    """
    speaks_bytes = isinstance(iterator.get_state(), (bytes, bytearray))
    try:
        iterator.set_state(loaded.text.encode("utf-8") if speaks_bytes else loaded.data)
    except ValueError as error:
        raise ValueError(
            f"Iterator state file {loaded.path} does not fit this iterator: {error}"
        ) from error


def _missing_file_message(directory: Any, path: Any, index: int, count: int) -> str:
    names = sorted(p.name for p in directory.iterdir()) if directory.exists() else None
    message = (
        f"Iterator state file {path} does not exist: no state was saved there for JAX "
        f"process {index} of {count}."
    )
    if names is None:
        return message + f" The directory {directory} does not exist either."
    others = [name for name in names if name.startswith("process_") and name.endswith(".json")]
    if others:
        return (
            message + f" The directory holds {listing(others)}: it was saved by another "
            "number of processes. Restore with as many JAX processes as saved it."
        )
    return (
        message
        + f" The directory holds {listing(names)}. Pass the directory the iterator was saved to."
    )


def _bad_json_message(path: Any, text: str, error: json.JSONDecodeError) -> str:
    # A truncated document fails at its end: in an open string, or at a cut-off last token.
    rest = text[error.pos :].rstrip()
    cut_token = any(word.startswith(rest) for word in ("true", "false", "null")) or bool(
        re.fullmatch(r"[-+.eE0-9]+", rest)
    )
    if error.msg.startswith("Unterminated string") or (error.msg != "Extra data" and cut_token):
        return (
            f"Iterator state file {path} is truncated: its {len(text)} characters end in the "
            "middle of the JSON. The save that wrote it did not finish; restore an earlier "
            "checkpoint."
        )
    return (
        f"Iterator state file {path} is not JSON ({error.msg} at line {error.lineno}, "
        f"column {error.colno}): it is corrupt or not an iterator state file. It reads there: "
        f'"{excerpt(text, error.pos)}".'
    )
