"""How a block of elements crosses from a worker process to the parent.

A block is pickled with protocol 5. Its large buffers (numpy arrays of
`INLINE_BYTES` or more) leave the pickle and are written, one after another,
into one anonymous memory file (`os.memfd_create`), whose descriptor travels
beside the pickle over the worker's socket (SCM_RIGHTS). The parent maps the
file and the arrays it unpickles are views of that mapping: one copy in all,
made by the worker.

An anonymous file has no name, which settles three faults at their root:
- nothing can leak: the kernel frees the memory as soon as no process holds
  the descriptor or a mapping, whoever dies and however (a SIGKILLed worker, a
  SIGKILLed parent, a whole container);
- nobody can squat it: there is no name in /dev/shm to guess or pre-create;
- /dev/shm's size does not bound it (Docker's default is 64 MiB): memory
  files live in the kernel's internal tmpfs, limited only by memory.
Where memory files are missing (not Linux) or making one fails (out of
memory), the buffers travel inside the pickle instead: slower, never wrong.

grainfn versions before memory files sent blocks through shared-memory
segments named `grainfn_<pid>_<n>` in /dev/shm, which a SIGKILLed process could
leave behind. `sweep_dead_segments` removes those of this user whose process
is gone; a pool runs it once per process.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import re
import socket
import stat
import sys
from collections.abc import Sequence
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

INLINE_BYTES = 64 * 1024
"""Buffers smaller than this travel inside the pickle, not through a memory file."""

MEMORY_FILE_NAME = "grainfn-block"
"""The name memory files show in /proc/PID/fd and /proc/PID/maps (as `memfd:grainfn-block`)."""

HAS_MEMORY_FILES = hasattr(os, "memfd_create")

_WRITE_CHUNK = 1 << 30  # os.write takes at most about 2 GiB at once

# Before Python 3.13 a mapping keeps a duplicate of its file's descriptor for
# as long as it lives, so every block whose arrays are alive holds one.
_UNTRACKED: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class Encoded:
    """A block ready to send: its pickle, the memory file of its buffers (or None), their sizes.

    The sender owns `descriptor` until it is sent; `close()` releases it.
    """

    __slots__ = ("data", "descriptor", "sizes")

    def __init__(self, data: bytes, descriptor: int | None, sizes: list[int]) -> None:
        self.data, self.descriptor, self.sizes = data, descriptor, sizes

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


def encode(block: list[Any], memory_files: bool = HAS_MEMORY_FILES) -> Encoded:
    """Pickles `block`, moving buffers of `INLINE_BYTES` or more into one memory file.

    Buffers under `INLINE_BYTES` stay in the pickle: for them a memory file
    costs more (making, mapping and freeing it) than the copy it saves. With
    `memory_files` false, or when the memory file cannot be made or written,
    every buffer stays in the pickle.
    """
    if not memory_files:
        return Encoded(pickle.dumps(block, protocol=5), None, [])
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < INLINE_BYTES:
            return True  # true: pickled in-band
        buffers.append(buffer)
        return False

    data = pickle.dumps(block, protocol=5, buffer_callback=out_of_band)
    if not buffers:
        return Encoded(data, None, [])
    views = [buffer.raw() for buffer in buffers]
    try:
        descriptor = _write_memory_file(views)
    except OSError:  # out of memory for the file: send the buffers in-band instead
        return Encoded(pickle.dumps(block, protocol=5), None, [])
    return Encoded(data, descriptor, [view.nbytes for view in views])


def decode(data: bytes, descriptor: int | None, sizes: Sequence[int]) -> list[Any]:
    """Unpickles a block from `encode`; its arrays are writable views of the memory file.

    Takes ownership of `descriptor` (closed here). The mapping stays for as
    long as an array uses it; the memory is freed when the last one goes.
    """
    if descriptor is None:
        return pickle.loads(data)
    try:
        mapping = mmap.mmap(descriptor, max(1, sum(sizes)), **_UNTRACKED)
    finally:
        os.close(descriptor)
    whole = memoryview(mapping)
    buffers, offset = [], 0
    for size in sizes:
        buffers.append(whole[offset : offset + size])
        offset += size
    return pickle.loads(data, buffers=buffers)


class Channel:
    """One end of a worker's socket, sending messages with an optional memory file beside them.

    `send(message, descriptor)` sends the message, then the descriptor (SCM_RIGHTS);
    `receive()` returns both. Descriptors still in the socket when both ends
    close are freed by the kernel.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._socket: socket.socket | None = None

    def send(self, message: Any, descriptor: int | None = None) -> None:
        self.connection.send((message, descriptor is not None))
        if descriptor is not None:
            reduction.sendfds(self._sock(), [descriptor])

    def receive(self) -> tuple[Any, int | None]:
        """The next message and its descriptor; EOFError or OSError if the other end is gone."""
        message, has_descriptor = self.connection.recv()
        if not has_descriptor:
            return message, None
        return message, reduction.recvfds(self._sock(), 1)[0]

    def poll(self) -> bool:
        return self.connection.poll()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self.connection.close()

    def _sock(self) -> socket.socket:
        if self._socket is None:
            # A second descriptor of the same socket: Connection offers no sendmsg.
            self._socket = socket.socket(fileno=os.dup(self.connection.fileno()))
        return self._socket


def _write_memory_file(views: list[memoryview]) -> int:
    descriptor = os.memfd_create(MEMORY_FILE_NAME, os.MFD_CLOEXEC)
    try:
        os.ftruncate(descriptor, max(1, sum(view.nbytes for view in views)))
        for view in views:  # PickleBuffer.raw(): flat, contiguous bytes
            written = 0
            while written < view.nbytes:
                written += os.write(descriptor, view[written : written + _WRITE_CHUNK])
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


_LEGACY_SEGMENT = re.compile(r"grainfn_(\d+)_\d+")


def sweep_dead_segments(directory: str = "/dev/shm") -> list[str]:
    """Removes the `grainfn_<pid>_<n>` segments of this user whose process `pid` is gone.

    Segments of other users, of live processes, and anything not named so
    are left alone. Returns the names removed.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed  # no /dev/shm here
    for entry in entries:
        match = _LEGACY_SEGMENT.fullmatch(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid != os.getuid() or not stat.S_ISREG(info.st_mode):
            continue
        if _process_exists(int(match[1])):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)
            removed.append(entry.name)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True
