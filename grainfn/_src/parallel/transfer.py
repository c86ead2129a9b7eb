"""How a block of elements crosses from a worker process to the parent.

A block is pickled with protocol 5. Its large buffers (numpy arrays of
`INLINE_BYTES` or more) leave the pickle and are written, one after another,
into one anonymous memory file (`os.memfd_create`), whose descriptor travels
beside the pickle over the worker's socket (SCM_RIGHTS). The parent maps the
file and the arrays it unpickles are views of that mapping: one copy in all,
made by the worker. A block of like elements (the same structure, shapes
and dtypes) travels as `Columns`: its array leaves stacked straight into the
memory file, so that a block of a thousand small images costs two copies, not
a thousand pickles.

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

import numpy as np

from grainfn._src.parallel.columns import Columns, Spec
from grainfn._src.parallel.ring import Ring, RingReader

INLINE_BYTES = 64 * 1024
"""Buffers smaller than this travel inside the pickle, of a block or of a pipeline
(`shipping`), not through a memory file: sharing them costs more than the copy."""

BLOCK_FILE_NAME = "grainfn-block"
"""The name memory files show in /proc/PID/fd and /proc/PID/maps (as `memfd:grainfn-block`)."""

HAS_MEMORY_FILES = hasattr(os, "memfd_create")

_WRITE_CHUNK = 1 << 30  # os.write takes at most about 2 GiB at once

# Before Python 3.13 a mapping keeps a duplicate of its file's descriptor for
# as long as it lives, so every block whose arrays are alive holds one.
_UNTRACKED: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class Encoded:
    """A block ready to send: its pickle, the memory file of its buffers (or None), their sizes.

    `at` is where in the worker's ring the buffers are instead (see `ring`),
    or None. The sender owns `descriptor` until it is sent; `close()`
    releases it.
    """

    __slots__ = ("at", "data", "descriptor", "sizes")

    def __init__(
        self, data: bytes, descriptor: int | None, sizes: list[int], at: int | None = None
    ) -> None:
        self.data, self.descriptor, self.sizes, self.at = data, descriptor, sizes, at

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


def encode_block(
    block: list[Any], memory_files: bool = HAS_MEMORY_FILES, ring: Ring | None = None
) -> Encoded:
    """Pickles `block`, moving buffers of `INLINE_BYTES` or more into one memory file.

    A block of like elements travels as `Columns`: each array leaf of all
    elements stacked straight into the memory file, or, where its rows are
    small and it fits, into the worker's `ring`. Otherwise buffers under
    `INLINE_BYTES` stay in the pickle: for them a memory file costs more
    (making, mapping and freeing it) than the copy it saves. With
    `memory_files` false, or when the memory file cannot be made or written,
    every buffer stays in the pickle.
    """
    plan = Columns.plan(block)
    if plan is not None:
        return _encode_columns(*plan, memory_files, ring)
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
        descriptor, _ = write_memory_file(BLOCK_FILE_NAME, views)
    except OSError:  # out of memory for the file: send the buffers in-band instead
        return Encoded(pickle.dumps(block, protocol=5), None, [])
    return Encoded(data, descriptor, [view.nbytes for view in views])


def _encode_columns(
    spec: Spec, rows: list[list[Any]], memory_files: bool, ring: Ring | None
) -> Encoded:
    """A block as `Columns`, its arrays stacked into the ring or a memory file if large."""
    layout = Columns.layout(spec, len(rows))
    sizes = [int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for _, shape, dtype in layout]
    small_rows = all(size < INLINE_BYTES * len(rows) for size in sizes)
    if ring is not None and small_rows and sum(sizes) <= ring.capacity // 4:
        at = ring.reserve(sum(sizes))
        if at is not None:  # the parent copies every row out, then frees the bytes
            data = _pickled_in_place(spec, rows, ring.region(at, sum(sizes)), sys.maxsize)
            return Encoded(data, None, sizes, at)
    if memory_files and sum(sizes) >= INLINE_BYTES:
        with contextlib.suppress(OSError):  # out of memory for the file: in-band instead
            return _columns_in_memory_file(spec, rows, sizes)
    return Encoded(pickle.dumps(Columns.stack(spec, rows, INLINE_BYTES), protocol=5), None, [])


def _columns_in_memory_file(spec: Spec, rows: list[list[Any]], sizes: list[int]) -> Encoded:
    """`Columns` of `rows` whose arrays are stacked in place, end to end, in a new memory file."""
    descriptor = os.memfd_create(BLOCK_FILE_NAME, os.MFD_CLOEXEC)
    try:
        os.ftruncate(descriptor, sum(sizes))
        mapping = mmap.mmap(descriptor, sum(sizes), **_UNTRACKED)
        data = _pickled_in_place(spec, rows, mapping, INLINE_BYTES)
    except BaseException:
        os.close(descriptor)
        raise
    with contextlib.suppress(BufferError):  # an array still alive: the collector frees it
        mapping.close()
    return Encoded(data, descriptor, sizes)


def _pickled_in_place(spec: Spec, rows: list[list[Any]], memory: Any, inline_bytes: int) -> bytes:
    """The pickle of `Columns` stacked into `memory`; its arrays leave it, as laid out there."""
    offset = 0

    def into(leaf: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
        nonlocal offset
        array = np.ndarray(shape, dtype, buffer=memory, offset=offset)
        offset += array.nbytes
        return array

    columns = Columns.stack(spec, rows, inline_bytes, into)
    arrays = len(columns.arrays)

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        nonlocal arrays  # the columns come first, in file order; anything after stays in-band
        arrays -= 1
        return arrays < 0

    return pickle.dumps(columns, protocol=5, buffer_callback=out_of_band)


def decode_block(
    data: bytes,
    descriptor: int | None,
    sizes: Sequence[int],
    at: int | None = None,
    ring: RingReader | None = None,
) -> list[Any]:
    """Unpickles a block from `encode_block`; its arrays are writable views of the memory file.

    Takes ownership of `descriptor` (closed here). The mapping stays for as
    long as an array uses it; the memory is freed when the last one goes. A
    block in the worker's `ring` (at `at`) is copied out, and its bytes freed
    for the worker, even if unpickling fails.
    """
    if at is not None:
        assert ring is not None, "a block in a ring the worker never sent"
        try:
            return _elements(pickle.loads(data, buffers=ring.buffers(at, list(sizes))))
        finally:
            ring.free(at + sum(sizes))
    if descriptor is None:
        return _elements(pickle.loads(data))
    try:
        mapping = mmap.mmap(descriptor, max(1, sum(sizes)), **_UNTRACKED)
    finally:
        os.close(descriptor)
    whole = memoryview(mapping)
    buffers, offset = [], 0
    for size in sizes:
        buffers.append(whole[offset : offset + size])
        offset += size
    return _elements(pickle.loads(data, buffers=buffers))


def _elements(block: list[Any] | Columns) -> list[Any]:
    return block.unpack() if isinstance(block, Columns) else block


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


def write_memory_file(
    name: str, buffers: Sequence[memoryview], alignment: int = 1
) -> tuple[int, tuple[int, ...]]:
    """A new memory file named `name` holding `buffers`, and the offset of each.

    Each buffer starts at a multiple of `alignment` (1: end to end). Written
    with `os.pwrite`: the kernel copies into the file's pages without holding
    the GIL (the reader goes on meanwhile), at about twice the speed of a copy
    through a mapping, which faults each page in first.

    Args:
        name: What /proc/PID/fd and /proc/PID/maps show (`memfd:<name>`).
        buffers: Flat, contiguous bytes (`PickleBuffer.raw()`).
        alignment: The multiple each buffer's offset is rounded up to.

    Returns:
        The file's descriptor (the caller closes it) and the buffers' offsets.

    Raises:
        OSError: if the file cannot be made or written (its descriptor is closed).
    """
    offsets = []
    length = 0
    for buffer in buffers:
        length = -(-length // alignment) * alignment
        offsets.append(length)
        length += buffer.nbytes
    descriptor = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.ftruncate(descriptor, max(1, length))
        for offset, buffer in zip(offsets, buffers):
            written = 0
            while written < buffer.nbytes:  # at most about 2 GiB a call
                chunk = buffer[written : written + _WRITE_CHUNK]
                written += os.pwrite(descriptor, chunk, offset + written)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, tuple(offsets)


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
