"""How a pipeline travels to worker processes and Ray actors: by reference to its data.

A pipeline is pickled once (cloudpickle, protocol 5). Its large buffers (numpy
arrays of `INLINE_BYTES` or more, wherever they sit: an array source, a dict
of arrays, a map function's closure, a custom source's attributes) leave the
pickle as out-of-band buffers, so the pickle itself stays small whatever the
size of the data. The buffers then travel once per pipeline, not once per
executor:
- to worker processes, in one anonymous memory file (`os.memfd_create`)
  written once, whose descriptor each worker receives over its socket and maps
  copy-on-write (`MAP_PRIVATE`): every worker reads the same pages, and a map
  that writes into its input writes into a page of its own, as it would into
  its own copy, changing nothing another worker or the parent sees;
- to Ray actors, as numpy arrays put once in the object store, which actors
  read as read-only views (Ray's rule: a map that writes into its input must
  copy it first, and the error says so).
Arrays that are already backed by a file need not travel at all: an
`np.memmap` opened read-only or read-write pickles as its file, offset, shape
and strides, and a worker maps the same file (copy-on-write where the parent
may write). grainfn's `SharedMemoryArray` pickles as its segment's name, and
file sources (ArrayRecord, Parquet) as their paths, as they always did.

`ship(pipeline)` encodes a pipeline once and keeps the result for as long
as the pipeline's objects live, so every iterator, epoch and restarted
worker of the same pipeline reuses it; the memory file is freed with it,
and, being anonymous, by the kernel when the process dies, however it dies.
What is pickled in-band (Python objects: a list of dicts, say) is copied
into each executor, as before.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import pickle
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import numpy as np

from grainfn._src.parallel.transfer import INLINE_BYTES, write_memory_file

PIPELINE_FILE_NAME = "grainfn-pipeline"
"""The name a pipeline's memory file shows in /proc/PID/fd and /proc/PID/maps."""

_ALIGNMENT = 64  # each buffer starts at a multiple of this in the memory file


COPY_RATE = 1e9
"""Bytes a second a pipeline's arrays are copied (into a memory file, Ray's store), about."""


class Shipped:
    """A pipeline encoded once: its pickle, and the buffers that left it (no copy of them).

    Attributes:
        data: The pickle, without its large buffers.
        buffers: Flat byte views of the large buffers, in the order the pickle
            takes them back: views of the pipeline's own arrays, not copies.
    """

    def __init__(self, data: bytes, buffers: Sequence[memoryview]) -> None:
        self.data = data
        self.buffers = tuple(buffers)
        self._lock = threading.Lock()
        self._memory: tuple[int, tuple[int, ...]] | None = None
        self._memory_failed = False
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def nbytes(self) -> int:
        """The bytes of the buffers that left the pickle."""
        return sum(buffer.nbytes for buffer in self.buffers)

    @property
    def unwritten_bytes(self) -> int:
        """The bytes `memory_file` has still to write: 0 once written (or where none is made)."""
        written = self._memory is not None or self._memory_failed
        return 0 if written else self.nbytes

    def memory_file(self) -> tuple[int, tuple[int, ...]] | None:
        """The descriptor of the memory file holding the buffers, and each one's offset.

        Written on the first call (once per pipeline; other callers wait for
        it) and kept until this record is collected. None when there are no
        buffers, or where a memory file cannot be made (not Linux, or out of
        memory): the buffers then travel in each worker's message instead.
        The descriptor stays this record's: a sender sends a duplicate.
        """
        if not self.buffers:
            return None
        with self._lock:
            if self._memory is None and not self._memory_failed:
                try:
                    self._memory = write_memory_file(PIPELINE_FILE_NAME, self.buffers, _ALIGNMENT)
                except (OSError, AttributeError):  # no memfd here, or no memory for it
                    self._memory_failed = True
                else:
                    self._finalizer = weakref.finalize(self, _close_memory, self._memory)
            return self._memory

    def message(self) -> tuple[Any, int | None]:
        """What a worker is sent to load the pipeline, and the descriptor to send beside it.

        With a memory file: `(data, offsets, sizes)` and its descriptor; without
        one: `(data, buffers as bytes, None)` and None (a copy per worker).
        """
        sizes = tuple(buffer.nbytes for buffer in self.buffers)
        memory = self.memory_file()
        if memory is None:
            return (self.data, [bytearray(buffer) for buffer in self.buffers], None), None
        descriptor, offsets = memory
        return (self.data, offsets, sizes), descriptor


def load_message(message: Any, descriptor: int | None) -> Any:
    """The pipeline a worker was sent (`Shipped.message`); takes ownership of `descriptor`.

    The buffers are copy-on-write views of the memory file: reading them
    shares the pages every worker maps, and writing one makes a private page.
    """
    data, where, sizes = message
    if sizes is None:  # no memory file: the buffers came in the message
        return pickle.loads(data, buffers=where)
    assert descriptor is not None, "a memory file's message comes with its descriptor"
    try:
        length = max(1, where[-1] + sizes[-1]) if sizes else 1
        mapping = mmap.mmap(descriptor, length, flags=mmap.MAP_PRIVATE)
    finally:
        os.close(descriptor)
    whole = memoryview(mapping)
    buffers = [whole[offset : offset + size] for offset, size in zip(where, sizes)]
    return pickle.loads(data, buffers=buffers)


def load_ray(data: bytes, arrays: Sequence[np.ndarray]) -> Any:
    """The pipeline an actor read from Ray's object store (`Shipped.data` and `ray_arrays`)."""
    return pickle.loads(data, buffers=[array.data for array in arrays])


def ray_arrays(shipped: Shipped) -> list[np.ndarray]:
    """The buffers as flat uint8 arrays (views, no copy), which Ray puts in its store as is."""
    return [np.frombuffer(buffer, dtype=np.uint8) for buffer in shipped.buffers]


def encode_pipeline(pipeline: Any) -> Shipped:
    """Pickles `pipeline` with its large buffers out of band (see the module).

    Raises:
        Exception: What pickling raised, with a note saying what to do.
    """
    buffers: list[memoryview] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        view = buffer.raw()
        if view.nbytes < INLINE_BYTES:
            return True  # true: pickled in-band
        buffers.append(view)
        return False

    file = io.BytesIO()
    try:
        _Pickler(file, protocol=5, buffer_callback=out_of_band).dump(pipeline)
    except Exception as error:  # the pickler's own error, with what to do
        error.add_note(
            "Worker processes need the pipeline pickled, and it does not pickle. Open files "
            "and connections lazily (on first read), not when the source is built."
        )
        raise
    return Shipped(file.getvalue(), buffers)


def ship(pipeline: tuple[Any, ...]) -> Shipped:
    """`encode_pipeline(pipeline)`, once for as long as the objects of the tuple `pipeline` live.

    A pipeline is the same when its parts are the same objects (the datasets
    an iterator reads, its `worker_init_fn`): a second iterator, a new epoch,
    a restarted worker get the same `Shipped`. Parts that cannot be weakly
    referenced are kept with the entry instead.
    """
    key = tuple(id(part) for part in pipeline)
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
    if entry is not None and all(ref() is part for ref, part in zip(entry[1], pipeline)):
        return entry[0]
    shipped = encode_pipeline(pipeline)
    refs = tuple(_reference(part) for part in pipeline)
    watched = [part for part, ref in zip(pipeline, refs) if isinstance(ref, weakref.ref)]
    if not watched:
        return shipped  # nothing would say when to forget it
    with _CACHE_LOCK:
        _CACHE[key] = (shipped, refs)
    for part in watched:
        weakref.finalize(part, _forget, key, shipped)
    return shipped


def _reference(part: Any) -> Callable[[], Any]:
    """A weak reference to `part` where it allows one, else a callable that holds it."""
    try:
        return weakref.ref(part)
    except TypeError:
        return lambda: part


_CACHE: dict[tuple[int, ...], tuple[Shipped, tuple[Callable[[], Any], ...]]] = {}
_CACHE_LOCK = threading.Lock()


def _forget(key: tuple[int, ...], shipped: Shipped) -> None:
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0] is shipped:
            del _CACHE[key]


def cached_pipelines() -> int:
    """How many pipelines are encoded and kept now (for tests and the curious)."""
    with _CACHE_LOCK:
        return len(_CACHE)


class _Pickler(cloudpickle.CloudPickler):
    """cloudpickle, with memory-mapped arrays by file and strided arrays made contiguous."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray) and obj.nbytes >= INLINE_BYTES:
            if isinstance(obj, np.memmap):
                by_file = _memmap_reduction(obj)
                if by_file is not None:
                    return by_file
            contiguous = obj.flags.c_contiguous or obj.flags.f_contiguous
            if not contiguous and obj.dtype.kind != "O":
                # numpy pickles a strided array as a copy inside the pickle: make that copy
                # contiguous here instead, so that it leaves the pickle and is shared.
                return np.ascontiguousarray(obj).__reduce_ex__(5)
        return super().reducer_override(obj)


def _memmap_reduction(array: np.memmap) -> tuple[Any, ...] | None:
    """How a memory-mapped array pickles as its file, or None where it must travel as data.

    A mapping opened copy-on-write (mode 'c') may hold changes the file lacks,
    and one without a file of its own has nothing to map again.
    """
    mapping = getattr(array, "_mmap", None)
    filename = getattr(array, "filename", None)
    if mapping is None or filename is None or array.mode == "c" or array.dtype.kind == "O":
        return None
    try:
        start = np.frombuffer(mapping, dtype=np.uint8).ctypes.data
    except (TypeError, ValueError):  # a closed mapping
        return None
    mapping_offset = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY
    low, high = _byte_bounds(array)
    file_low = mapping_offset + (low - start)
    writable = array.mode != "r"
    return (
        _map_file,
        (
            os.fspath(filename),
            file_low,
            high - low,
            array.dtype,
            array.shape,
            array.strides,
            array.ctypes.data - low,
            writable,
        ),
    )


def _byte_bounds(array: np.ndarray) -> tuple[int, int]:
    bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds
    low, high = bounds(array)
    return int(low), int(high)


def _map_file(
    filename: str,
    offset: int,
    length: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    first: int,
    writable: bool,
) -> np.ndarray:
    """An array over bytes `[offset, offset + length)` of `filename`, mapped again here.

    Copy-on-write where the parent's mapping could write (so a write here
    changes neither the file nor what another process reads), read-only
    where it could not (so a write fails here as it would there).
    """
    base = np.memmap(filename, dtype=np.uint8, mode="c" if writable else "r", offset=offset,
                     shape=(max(1, length),))  # fmt: skip
    array = np.ndarray(shape, dtype, buffer=base, offset=first, strides=strides)
    if not writable:
        array.flags.writeable = False
    return array


def _close_memory(memory: tuple[int, tuple[int, ...]]) -> None:
    with contextlib.suppress(OSError):
        os.close(memory[0])
