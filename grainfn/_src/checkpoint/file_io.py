"""Writing and reading one state file safely: all at once, and only a small regular file.

- `write_atomically` writes into a temporary file beside the target, syncs
  it, then renames it onto its name: a save that fails (a full disk, a killed
  process) leaves the previous file as it was;
- `read_state_bytes` reads a file only if it is a regular file (a FIFO, a
  device or a directory at its name is refused without reading it) of at
  most `STATE_FILE_LIMIT` bytes;
- `excerpt` is what a message may quote of a file it could not use: at most
  `EXCERPT_LIMIT` printable ASCII characters.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from typing import Any

from grainfn._src.core.file_kinds import what_is_at

STATE_FILE_LIMIT = 64 * 1024 * 1024
"""The most bytes a state file may have (64 MiB): a state is positions and counters, never data."""

EXCERPT_LIMIT = 80
"""The most characters of a file's text that an error message quotes."""


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


def check_inside(path: Any, directory: Any) -> None:
    """Refuses, unread, a local state file that a link leads out of the checkpoint `directory`.

    A link inside the folder is fine; one that leaves it could make a restore
    read (and an error quote) any file the process may read.

    Raises:
        ValueError: naming the file and the folder, never what the file holds.
    """
    name, folder = _local_name(path), _local_name(directory)
    if name is None or folder is None:
        return  # remote storage has no links to follow
    real, root = os.path.realpath(name), os.path.realpath(folder)
    if os.path.commonpath([real, root]) != root:
        raise ValueError(
            f"Iterator state file {printable(os.fspath(name))} is a link out of the checkpoint "
            f"folder {printable(os.fspath(folder))}: it is refused unread. Copy the state file "
            "into the folder instead of linking to it."
        )


def printable(name: str) -> str:
    r"""`name` as is if every character prints, else its `ascii()` form (escapes shown, not run).

    Examples:
        >>> printable("process_0-of-1.json"), printable("bad\x1b[31mname")
        ('process_0-of-1.json', "'bad\\x1b[31mname'")
    """
    return name if name.isprintable() else ascii(name)


def listing(names: list[str], most: int = 8) -> str:
    """At most `most` names, printable, and how many more there are.

    Examples:
        >>> listing(["a", "b", "c"], most=2)
        'a, b and 1 more'
        >>> listing([])
        'nothing'
    """
    if not names:
        return "nothing"
    shown = ", ".join(printable(name) for name in names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


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


def read_state_bytes(path: Any, limit: int = STATE_FILE_LIMIT) -> bytes:
    """The bytes of the state file `path`, if it is a regular file of at most `limit` bytes.

    A local file is checked before it is read: `os.stat` (which follows
    symbolic links: a link to a state file is fine, `check_inside` refuses one
    out of the checkpoint folder) must find a regular file,
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
