"""Cheap fingerprints of the files a pipeline reads: a restore into changed files is refused.

A source that reads files says which by a method `file_paths()`: a mapping
from each file's name as the source shows it (in its pipeline description)
to the path to open it by. `files_read` walks a pipeline (datasets and
streams, through `.parents`) and collects those of every stage, and of every
object a stage holds in a dataclass field (a `source(...)` stage holds its
data source in one). `fingerprint` sums a file up by its size and a digest of
its first and last 4 KiB: one open and one `fstat`, whatever the file's size.

`grainfn._src.core.state_codec.StateCodec` records the fingerprints once per
iterator, in the saved state's `"files"`, and compares them on restore
(`changed_files`).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Mapping
from typing import Any, Protocol

EDGE = 4096
"""Bytes digested at each end of a file."""


class ReadsFiles(Protocol):
    """A data source or stage that reads local files, which checkpoints fingerprint."""

    def file_paths(self) -> Mapping[str, str]:
        """The files read: each name as the pipeline description shows it, to the path to open."""
        ...


def fingerprint(path: str) -> str | None:
    """`"{size}:{digest}"` of the regular file at `path`, or None if there is none to read.

    The digest is blake2b (16 bytes) of the file's first and last 4 KiB (all
    of a file of up to 8 KiB). The file is opened without blocking, so a FIFO
    or a device at `path` gives None instead of a read that never returns.

    Examples:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = os.path.join(folder.name, "x.bin")
        >>> with open(file, "wb") as f:
        ...     _ = f.write(b"abc")
        >>> fingerprint(file)
        '3:cf4ab791c62b8d2b2109c90275287816'
        >>> fingerprint(os.path.join(folder.name, "missing")) is None
        True
        >>> folder.cleanup()
    """
    import hashlib  # loads OpenSSL (3 ms): imported when a file is read, not with grainfn

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        digest = hashlib.blake2b(digest_size=16)
        digest.update(os.read(fd, EDGE))
        if info.st_size > EDGE:
            os.lseek(fd, max(EDGE, info.st_size - EDGE), os.SEEK_SET)
            digest.update(os.read(fd, EDGE))
        return f"{info.st_size}:{digest.hexdigest()}"
    except OSError:
        return None
    finally:
        os.close(fd)


def files_read(node: Any) -> dict[str, str]:
    """The files the pipeline above `node` reads, by shown name, to the path to open.

    Examples:
        >>> from grainfn import fn
        >>> files_read(fn.batch(2, fn.from_dataset(fn.range(4))))
        {}
    """
    found: dict[str, str] = {}
    seen: set[int] = set()
    pending = [node]
    while pending:
        stage = pending.pop()
        if id(stage) in seen:
            continue
        seen.add(id(stage))
        holders = [stage]
        if dataclasses.is_dataclass(stage) and not isinstance(stage, type):
            holders.extend(getattr(stage, field.name, None) for field in dataclasses.fields(stage))
        for holder in holders:
            method = getattr(type(holder), "file_paths", None)
            if callable(method):
                found.update(method(holder))
        pending.extend(reversed(getattr(stage, "parents", ())))
    return found


def fingerprints(files: Mapping[str, str]) -> dict[str, str]:
    """The fingerprints of `files` (`files_read`'s form), leaving out those not readable now."""
    out = {}
    for name, path in files.items():
        value = fingerprint(path)
        if value is not None:
            out[name] = value
    return out


def changed_files(files: Mapping[str, str], current: Mapping[str, str], saved: Any) -> str | None:
    """Why the files differ from the fingerprints `saved` with a state, or None if they don't.

    Args:
        files: The pipeline's files, as `files_read` gives them.
        current: Their fingerprints now, as `fingerprints` gives them.
        saved: The `"files"` entry of a saved state: file name to fingerprint.
            A name the pipeline does not read is not compared, nor is a file
            that is missing or not a regular file now: reading it fails, and
            its stage says why in its own words (a FIFO is refused unopened).

    Returns:
        A message naming the first changed file and what changed, the other
        changed files, and what to do; None if every saved file is unchanged.

    Raises:
        ValueError: if `saved` is not a dict of str to str.

    Examples:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> files = {"x.bin": os.path.join(folder.name, "x.bin")}
        >>> with open(files["x.bin"], "wb") as f:
        ...     _ = f.write(b"abc")
        >>> saved = fingerprints(files)
        >>> changed_files(files, fingerprints(files), saved) is None
        True
        >>> with open(files["x.bin"], "wb") as f:
        ...     _ = f.write(b"abcd")
        >>> print(changed_files(files, fingerprints(files), saved))
        File 'x.bin' has changed since the state was saved: it had 3 bytes, now 4. ...
        >>> folder.cleanup()
    """
    if not isinstance(saved, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in saved.items()
    ):
        raise ValueError(
            f"State dict field 'files' must map file names to fingerprints (str to str), got "
            f"{_short(saved)}. Pass a dict that get_state returned."
        )
    changes = [
        (name, old, current[name])
        for name, old in saved.items()
        if name in files and name in current and current[name] != old
    ]
    if not changes:
        return None
    name, old, new = changes[0]
    others = ""
    if len(changes) > 1:
        more = ", ".join(repr(other) for other, _, _ in changes[1:4])
        rest = len(changes) - 4
        etc = f" and {rest} other{'s' if rest > 1 else ''}" if rest > 0 else ""
        others = f" {len(changes) - 1} more changed too: {more}{etc}."
    return (
        f"File {name!r} has changed since the state was saved: {_what_changed(old, new)}."
        f"{others} The state's positions would point into other data, so it is not "
        "restored. Restore with the files the checkpoint was written with, or start the "
        "pipeline afresh (without set_state)."
    )


def _what_changed(old: str, new: str) -> str:
    old_size = old.partition(":")[0]
    new_size = new.partition(":")[0]
    if new_size != old_size:
        return f"it had {old_size} bytes, now {new_size}"
    return (
        f"it has the same size ({new_size} bytes), but its content at its start or end "
        f"(first or last {EDGE // 1024} KiB) differs"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
