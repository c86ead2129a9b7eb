"""A worker's ring: shared memory, mapped once, that carries its blocks of small rows.

A memory file made and mapped per block costs a page fault per 4 KiB on
both sides, which on a virtual machine is microseconds apiece: for a block of
small images, more than the images cost to compute. So each worker makes one
memory file at start, `RING_BYTES` long, which the parent maps once too (it
comes with the worker's "ready"). The worker stacks a block of small rows
(`Columns`, each row under `transfer.INLINE_BYTES`) into the ring's next free
bytes; the parent copies the rows out as soon as the block arrives (small
rows were always copies) and then marks those bytes free. After the first
laps no page is ever faulted again.

The parent marks bytes free by writing, in the ring's first 8 bytes, how many
bytes it has freed in all since the start (blocks of one worker arrive and
are copied in order, so this only grows); the worker reads it before it
reuses bytes. When the parent has copied out every block, the worker starts its
next block at the front of the ring again, not after the last one: a ring
whose parent keeps up touches only the pages of the blocks in flight
(a 64 MiB ring touched lap after lap cost each worker about 50 ms of page
faults per iterator on this VM, reading 20,000 small images).
A block that does not fit in the free bytes travels as before,
in a memory file of its own: the ring never makes a worker wait. The memory
goes with the last process that maps it, however it ends.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct

RING_BYTES = 64 * 2**20
"""The bytes of each worker's ring (touched as used: a ring of small blocks stays small)."""

RING_FILE_NAME = "grainfn-ring"
"""The name rings show in /proc/PID/maps (as `memfd:grainfn-ring`)."""

_HEADER = 64  # the freed count, then padding: the rows start aligned
_FREED = struct.Struct("<Q")


class _Mapped:
    """A ring's mapping, in either process."""

    mapping: mmap.mmap

    @property
    def capacity(self) -> int:
        """The bytes for blocks (the header apart)."""
        return len(self.mapping) - _HEADER

    def free(self, end: int) -> None:
        """Marks every byte before `end` (since the start) free: the parent's part."""
        _FREED.pack_into(self.mapping, 0, end)

    def close(self) -> None:
        with contextlib.suppress(BufferError):  # a view still alive: the collector frees it
            self.mapping.close()


class Ring(_Mapped):
    """The worker's side: reserves the next free bytes for a block.

    Args:
        size: The ring's bytes, header included.
    """

    def __init__(self, size: int = RING_BYTES) -> None:
        self.descriptor: int | None = os.memfd_create(RING_FILE_NAME, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.descriptor, size)
            self.mapping = mmap.mmap(self.descriptor, size)
        except BaseException:
            os.close(self.descriptor)
            raise
        self.head = 0  # bytes reserved since the start, gaps at the end of a lap included
        self.front = 0  # bytes known free since the start: those freed, and the gaps skipped

    def reserve(self, nbytes: int) -> int | None:
        """Where (in bytes since the start) a block of `nbytes` goes; None if it does not fit now.

        A block never wraps: one that would pass the end starts the next lap.
        Once every block reserved has been freed, the next one starts the next
        lap too, at the front, whose pages are already touched.

        Examples:
            >>> ring = Ring(size=64 + 100)
            >>> ring.reserve(60), ring.reserve(60)  # the second must wait for the first
            (0, None)
            >>> ring.free(60)  # what the parent does once it copied the block out
            >>> ring.reserve(30)  # everything freed: back to the front, in the next lap
            100
            >>> ring.reserve(30)  # the first not freed yet: right after it
            130
        """
        capacity = self.capacity
        head, front = self.head, self.front
        freed = max(_FREED.unpack_from(self.mapping, 0)[0], front)
        lap = head % capacity
        if freed == head and lap:  # every block copied out: back to the front's touched pages
            head = freed = head + capacity - lap
            lap = 0
        start = head if lap + nbytes <= capacity else head + capacity - lap
        if nbytes > capacity or start + nbytes - freed > capacity:
            return None
        self.head, self.front = start + nbytes, freed
        return start

    def region(self, start: int, nbytes: int) -> memoryview:
        """The bytes reserved at `start` (from `reserve`)."""
        offset = _HEADER + start % self.capacity
        return memoryview(self.mapping)[offset : offset + nbytes]

    def handed_over(self) -> None:
        """Closes this process's descriptor once the parent has its own (the mapping stays)."""
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


class RingReader(_Mapped):
    """The parent's side of a worker's ring: the bytes of a block, and freeing them.

    Takes ownership of `descriptor` (closed once mapped).
    """

    def __init__(self, descriptor: int) -> None:
        try:
            self.mapping = mmap.mmap(descriptor, os.fstat(descriptor).st_size)
        finally:
            os.close(descriptor)

    def buffers(self, start: int, sizes: list[int]) -> list[memoryview]:
        """The buffers of a block laid end to end at `start` (see `Ring.reserve`)."""
        out, offset = [], _HEADER + start % self.capacity
        whole = memoryview(self.mapping)
        for size in sizes:
            out.append(whole[offset : offset + size])
            offset += size
        return out
