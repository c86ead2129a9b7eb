"""What is at a path: grainfn reads regular files only.

A FIFO blocks whoever opens it until a writer comes, and a device such as
`/dev/zero` is read without end, so every reader of files (state files,
ArrayRecord, TFRecord) refuses anything but a regular file before it opens
it, and says what it found.
"""

from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    """What a file of `os.stat` mode `mode` is, in words.

    Examples:
        >>> file_kind(os.stat("/dev/null").st_mode), file_kind(os.stat("/").st_mode)
        ('a character device', 'a directory')
    """
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return f"a special file (mode {stat.filemode(mode)})"


def what_is_at(name: str, mode: int) -> str:
    """What the file `name` of `os.stat` mode `mode` is, naming a symbolic link's target.

    Examples:
        >>> what_is_at("/dev/null", os.stat("/dev/null").st_mode)
        'a character device'
    """
    what = file_kind(mode)
    if os.path.islink(name):
        return f"a symbolic link to {os.path.realpath(name)!r}, {what}"
    return what


def check_regular_file(path: str, kind: str) -> os.stat_result:
    """`os.stat(path)` (following symbolic links), if `path` is a regular file.

    Args:
        path: The file to check.
        kind: The format, for the message ("ArrayRecord", "TFRecord").

    Returns:
        The file's `os.stat` result.

    Raises:
        FileNotFoundError: if nothing is at `path` (or a symbolic link there
            points nowhere).
        ValueError: if it is not a regular file, naming what it is.

    Examples:
        >>> check_regular_file("/dev/null", "ArrayRecord")
        Traceback (most recent call last):
        ...
        ValueError: ArrayRecord file '/dev/null' is a character device, not a regular file: ...
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(not_regular_message(path, kind, info.st_mode))
    return info


def not_regular_message(path: str, kind: str, mode: int) -> str:
    """The refusal of `path`, of `os.stat` mode `mode`, which is not a regular file."""
    return (
        f"{kind} file {path!r} is {what_is_at(path, mode)}, not a regular file: {kind} files "
        "must be regular files (reading a FIFO or a device would block or never end), so it is "
        f"not opened. Pass a regular {kind} file."
    )


def check_replaceable(name: str, kind: str) -> None:
    """Refuses to write `name` if something other than a regular file is there.

    Opening a FIFO for writing blocks until someone reads it, and a device
    would swallow the records: neither is replaced by a file of records.

    Raises:
        IsADirectoryError: if `name` is a directory (an OSError, as for any
            path that cannot be written).
        ValueError: if `name` is anything else but a regular file (a FIFO, a
            device, a socket), naming what it is.

    Examples:
        >>> check_replaceable("/dev/null", "ArrayRecord")
        Traceback (most recent call last):
        ...
        ValueError: Cannot write the ArrayRecord file '/dev/null': it is a character device, ...
    """
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    message = (
        f"Cannot write the {kind} file {name!r}: it is {file_kind(mode)}, not a regular "
        f"file, so it is not opened. Remove it, or write to another path."
    )
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(message)
    raise ValueError(message)
