"""Which files a source reads: one path, a list of paths, or glob patterns, checked.

A source names its files as the user wrote them (its `repr`, and so the
pipeline description a checkpoint is checked against, must not depend on the
working directory) and opens them by absolute path (so that a later `chdir`,
or a worker started elsewhere, still finds them).

Only regular files are read (`grainfn._src.core.file_kinds`): a check refuses a FIFO, a device,
a socket or a directory by one `os.stat` before any reader opens it (a FIFO
would block the open forever, a device would be read without end). The
TFRecord reader uses the same check.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence

from grainfn._src.core.file_kinds import not_regular_message

PathLike = str | os.PathLike[str]
"""A file name or glob pattern: a `str` or an `os.PathLike` such as `pathlib.Path`."""

Paths = PathLike | Sequence[PathLike]
"""What `ArrayRecordDataSource` accepts: one path or pattern, or a sequence of them."""

_SHOWN = 4  # at most this many paths are spelt out in a repr
_GLOB_MAGIC = re.compile(r"[*?[]")

_HOW = (
    "Pass an ArrayRecord file, a list of them, or a glob pattern such as "
    "'data/train-*.array_record'."
)


def resolve(paths: Paths) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files `paths` names, in order: as written, and as absolute paths.

    A string that names no existing file but contains `*`, `?` or `[` is a glob
    pattern and stands for the files it matches, sorted by name. Patterns may
    also appear in a list; each is expanded in place.

    Args:
        paths: One path or pattern (`str` or `os.PathLike`), or a sequence of them.

    Returns:
        `(shown, absolute)`: the files as written (patterns expanded) and the
        same files as absolute paths.

    Raises:
        TypeError: if `paths` or an entry of it is not a path.
        ValueError: if `paths` is an empty sequence or names a directory.
        FileNotFoundError: if a file does not exist or a pattern matches nothing.

    Examples:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> for name in ("b.array_record", "a.array_record"):
        ...     open(os.path.join(folder.name, name), "wb").close()
        >>> shown, absolute = resolve(os.path.join(folder.name, "*.array_record"))
        >>> [os.path.basename(p) for p in shown]
        ['a.array_record', 'b.array_record']
        >>> folder.cleanup()
    """
    entries = _entries(paths)
    shown: list[str] = []
    for entry in entries:
        shown.extend(_expand(entry))
    for path in shown:
        _check_file(path)
    return tuple(shown), tuple(os.path.abspath(path) for path in shown)


def _entries(paths: Paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [_as_str(paths)]
    if isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Sequence):
        raise TypeError(
            f"paths must be a path (str or os.PathLike), a glob pattern, or a sequence of "
            f"them, got {paths!r} of type {type(paths).__name__}. {_HOW}"
        )
    if len(paths) == 0:
        raise ValueError(f"paths is an empty sequence: there are no files to read. {_HOW}")
    entries = []
    for position, path in enumerate(paths):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"paths[{position}] must be a path (str or os.PathLike), got {path!r} of type "
                f"{type(path).__name__}."
            )
        entries.append(_as_str(path))
    return entries


def _as_str(path: PathLike) -> str:
    name = os.fspath(path)
    if not isinstance(name, str):
        raise TypeError(f"paths must be text, got the bytes path {name!r}; decode it first.")
    if not name:
        raise ValueError(f"A path is the empty string. {_HOW}")
    return name


def _expand(entry: str) -> list[str]:
    if os.path.lexists(entry) or not _GLOB_MAGIC.search(entry):
        return [entry]
    matches = sorted(glob.glob(entry))
    if not matches:
        raise FileNotFoundError(
            f"The glob pattern {entry!r} matches no files. Check the directory and the "
            f"pattern, or pass the file names themselves."
        )
    return matches


def _check_file(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"ArrayRecord file {path!r} does not exist. {_HOW}") from None
    if stat.S_ISDIR(mode):
        raise ValueError(
            f"{path!r} is a directory, not an ArrayRecord file. Pass the files in it, for "
            f"example {os.path.join(path, '*.array_record')!r}."
        )
    if not stat.S_ISREG(mode):
        raise ValueError(not_regular_message(path, "ArrayRecord", mode))


def array_record_repr(paths: tuple[str, ...], reader_options: Mapping[str, str]) -> str:
    """A source's repr: its files (the first and last ones and a digest of all if many), options.

    Examples:
        >>> array_record_repr(("a.array_record",), {"max_parallelism": "1"})
        "ArrayRecordDataSource('a.array_record', reader_options={'max_parallelism': '1'})"
    """
    if len(paths) == 1:
        files = repr(paths[0])
    elif len(paths) <= _SHOWN:
        files = repr(list(paths))
    else:
        digest = hashlib.sha256("\n".join(paths).encode()).hexdigest()[:12]
        files = (
            f"[{paths[0]!r}, {paths[1]!r}, ..., {paths[-1]!r}] "
            f"({len(paths)} files, sha256 {digest})"
        )
    options = f", reader_options={dict(reader_options)!r}" if reader_options else ""
    return f"ArrayRecordDataSource({files}{options})"
