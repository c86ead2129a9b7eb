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

Nothing is lost and nothing hangs:

- every state file is written atomically (`write_atomically`): into a
  temporary file beside it, synced, then renamed onto its name, so a save
  that fails (a full disk, a killed process) leaves the previous file as it
  was;
- a state file is read only if it is a regular file (a FIFO, a device or a
  directory at its name is refused without reading it) of at most
  `STATE_FILE_LIMIT` bytes;
- a message that quotes a file it could not use quotes at most
  `EXCERPT_LIMIT` printable ASCII characters of it (`excerpt`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import secrets
import stat
from typing import Any, NamedTuple, Protocol

from grainfn._src.core.file_kinds import what_is_at

STATE_FILE_LIMIT = 64 * 1024 * 1024
"""The most bytes a state file may have (64 MiB): a state is positions and counters, never data."""

EXCERPT_LIMIT = 80
"""The most characters of a file's text that an error message quotes."""


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


def write_atomically(path: Any, data: bytes) -> None:
    """Replaces the file at `path` by `data`, all at once: a failed write changes nothing.

    A local file is written to a new temporary file in the same directory
    (created exclusively, under an unguessable name), flushed to disk with
    `fsync`, renamed onto `path` with `os.replace`, and the directory is
    synced (where the system allows it). A remote path (Orbax's `epath`, such
    as `gs://...`) is written to a temporary name beside it and then renamed,
    with the path's own methods. If anything fails, the temporary file is
    removed and the error raised: the file at `path`, if there was one, is
    untouched.

    Args:
        path: The file to write: a path, a string, or an `epath.Path`.
        data: Its new content.

    Raises:
        OSError: if the file cannot be written (a full disk, a file too large,
            no permission); `path` is then as it was.

    Examples:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> write_atomically(folder / "state.json", b'{"version": 1}')
        >>> (folder / "state.json").read_bytes(), [path.name for path in folder.iterdir()]
        (b'{"version": 1}', ['state.json'])
    """
    local = _local_name(path)
    if local is None:
        _replace_by_path_methods(path, data)
    else:
        _replace_local_file(local, data)


def _local_name(path: Any) -> str | None:
    """`path` as a local file name, or None for a remote path (one with a `scheme://`)."""
    if isinstance(path, (str, os.PathLike)):
        name = os.fspath(path)
        if isinstance(name, str) and "://" not in name:
            return name
    return None


def _replace_local_file(name: str, data: bytes) -> None:
    directory = os.path.dirname(name) or "."
    descriptor, temporary = _create_temporary(directory, os.path.basename(name))
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(directory)


def _create_temporary(directory: str, base: str) -> tuple[int, str]:
    """A new file beside `base`, opened for writing: its descriptor and its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temporary = os.path.join(directory, f".{base}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:  # pragma: no cover (64 random bits taken already)
            continue
    raise FileExistsError(  # pragma: no cover
        f"Cannot create a temporary file for {base} in {directory}: every name tried exists."
    )


def _sync_directory(directory: str) -> None:
    """Syncs `directory`, so that the rename in it survives a crash (where the system allows)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:  # some systems and file systems cannot sync a directory: best effort
        pass
    finally:
        os.close(descriptor)


def _replace_by_path_methods(path: Any, data: bytes) -> None:
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        with temporary.open("wb") as file:
            file.write(data)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(Exception):
            if temporary.exists():
                temporary.unlink()
        raise


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


def read_state_bytes(path: Any, limit: int = STATE_FILE_LIMIT) -> bytes:
    """The bytes of the state file `path`, if it is a regular file of at most `limit` bytes.

    A local file is checked before it is read: `os.stat` (which follows
    symbolic links: a link to a state file is fine) must find a regular file,
    and the file is opened without blocking (`O_NONBLOCK`, so a FIFO swapped
    in meanwhile cannot hold the open) and checked again with `fstat`. At
    most `limit + 1` bytes are ever read.

    Args:
        path: The state file: a path, a string, or an `epath.Path`.
        limit: The most bytes it may have.

    Raises:
        FileNotFoundError: if there is no file at `path`.
        ValueError: if it is not a regular file (naming what it is: a FIFO,
            a character device, a directory, ...), or holds more than `limit`
            bytes.

    Examples:
        >>> read_state_bytes("/dev/null")
        Traceback (most recent call last):
        ...
        ValueError: Iterator state file /dev/null is a character device, not a regular file: ...
    """
    name = _local_name(path)
    if name is None:
        if not path.exists():
            raise FileNotFoundError(f"Iterator state file {path} does not exist.")
        with path.open("rb") as file:
            raw = file.read(limit + 1)
        if len(raw) > limit:
            raise ValueError(_too_large_message(path, None, limit))
        return bytes(raw)
    _check_regular(path, name, os.stat(name).st_mode)
    descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(descriptor)
        _check_regular(path, name, info.st_mode)
        if info.st_size > limit:
            raise ValueError(_too_large_message(path, info.st_size, limit))
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:  # it grew while being read
            raise ValueError(_too_large_message(path, None, limit))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def excerpt(data: str | bytes, start: int = 0, width: int = EXCERPT_LIMIT) -> str:
    r"""At most `width` characters of `data` from `start` on, safe to print in a message.

    Printable ASCII characters are kept; tabs and line breaks become spaces
    and every other character (or byte) becomes `?`, so that a message never
    carries control characters or megabytes of a file. A cut excerpt ends in
    `...` (counted in `width`).

    Examples:
        >>> excerpt(b"\x1b[31m{\n}\xff")
        '?[31m{ }?'
        >>> excerpt("x" * 100, width=10)
        'xxxxxxx...'
    """
    part = data[start : start + width + 1]
    codes = part if isinstance(part, bytes) else map(ord, part)
    shown = "".join(
        chr(code) if 32 <= code < 127 else " " if code in (9, 10, 13) else "?" for code in codes
    )
    return shown if len(shown) <= width else shown[: max(0, width - 3)] + "..."


def _check_regular(path: Any, name: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    raise ValueError(
        f"Iterator state file {path} is {what_is_at(name, mode)}, not a regular file: a state "
        "file must be a regular file, as a save writes it, so it is not read. Pass the "
        "directory the iterator was saved to, or put the saved file at this name."
    )


def _too_large_message(path: Any, size: int | None, limit: int) -> str:
    has = f"is {size} bytes" if size is not None else "holds more bytes"
    return (
        f"Iterator state file {path} {has}, more than the limit of {limit} bytes "
        f"({limit / 2**20:g} MiB) for a state file: an iterator state is positions and "
        "counters, never data, so this is not one. Pass the directory the iterator was saved to."
    )


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
        holds = f"it holds {', '.join(names)}" if names else "it is empty or does not exist"
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
            message + f" The directory holds {', '.join(others)}: it was saved by another "
            "number of processes. Restore with as many JAX processes as saved it."
        )
    listing = ", ".join(names) if names else "nothing"
    return (
        message + f" The directory holds {listing}. Pass the directory the iterator was saved to."
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
