"""SharedMemoryArray: a numpy array whose buffer is a shared-memory segment.

Grain's `grain.python.SharedMemoryArray` (and `grain.multiprocessing`'s, with
`SharedMemoryArrayMetadata`). It pickles as its segment's name, shape and
dtype (`metadata`), so another process on the machine attaches to the same
memory (`SharedMemoryArray.from_metadata`) instead of receiving a copy.

Who frees what:
- The *mapping* is held by the array that attached to the segment, its owner,
  and released when the owner is collected: never before the views sliced
  from it, since each view keeps its base alive. Views release nothing.
- The *segment* lives until unlinked. As in Grain, the process that uses it
  last calls `unlink_on_del()`: the segment goes when the owner is collected.
  `unlink()` (a grainfn addition) unlinks at once, and
  `SharedMemoryArrayMetadata.close_and_unlink_shm()` from a record.
  `unlink_on_del()` binds the process that calls it: a forked child dropping
  its inherited copy leaves its parent's segment alone.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import threading
import weakref
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import shared_memory
from typing import Any, ClassVar, SupportsIndex

import numpy as np
import numpy.typing as npt

# Segments a live array owns (and unmaps when collected): one array each.
_OWNED: weakref.WeakSet[shared_memory.SharedMemory] = weakref.WeakSet()


@dataclasses.dataclass(frozen=True)
class SharedMemoryArrayMetadata:
    """What another process needs to attach to a SharedMemoryArray: name, shape and dtype.

    Attributes:
        name: The shared-memory segment's name.
        shape: The array's shape (stored as a tuple of ints).
        dtype: The array's dtype (stored as a `numpy.dtype`).

    Examples:
        >>> meta = SharedMemoryArrayMetadata("psm_example", [2, 3], "int32")
        >>> meta.shape, meta.dtype
        ((2, 3), dtype('int32'))
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _as_shape(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    def close_and_unlink_shm(self) -> None:
        """Unlinks the segment this record names (FileNotFoundError if it is gone)."""
        shm = _attach(self.name)
        _release(shm, unlink=True)


class _AsyncDeletion:
    """Background threads that close and unlink segments, with a bound on waiting requests."""

    def __init__(self, num_threads: int, max_outstanding_requests: int) -> None:
        self.executor = ThreadPoolExecutor(num_threads, thread_name_prefix="grainfn-shm-del")
        self.slots = threading.Semaphore(max(max_outstanding_requests, num_threads))


def _release(shm: shared_memory.SharedMemory, unlink: bool) -> None:
    # try/except, not contextlib.suppress: this runs from __del__, maybe at interpreter
    # exit, when this module's globals may already be gone.
    try:  # noqa: SIM105
        shm.close()
    except BufferError:
        pass  # someone exported shm.buf further; the mapping goes with that export
    if unlink:
        try:  # noqa: SIM105
            shm.unlink()
        except FileNotFoundError:
            pass  # already unlinked, by `unlink()` or another process


def _close_in_background(
    cls: type[SharedMemoryArray],
    shm: shared_memory.SharedMemory,
    unlink: bool,
    deletion: _AsyncDeletion,
) -> None:
    try:
        cls.close_shm_async(shm, unlink)
    finally:
        deletion.slots.release()


class SharedMemoryArray(np.ndarray[Any, np.dtype[Any]]):
    """A numpy array in a new shared-memory segment, of `shape` and `dtype`, zero-filled.

    `shape` is a sequence of ints whose product is at least 1 (a segment
    cannot be empty); `dtype` (float by default) is any numpy dtype without
    Python objects in it, whose pointers would mean nothing in another process.
    Slices and other views are SharedMemoryArrays on the same segment (`shm`
    is shared); ufunc results and reductions are plain numpy arrays, and
    `.copy()` is a SharedMemoryArray with no segment (`shm` is None).

    Raises:
        TypeError: `shape` is not a sequence of ints, or `dtype` is not a dtype.
        ValueError: The array would hold no bytes, or `dtype` holds objects.

    Examples:
        >>> a = SharedMemoryArray((2, 3), dtype=np.int32)
        >>> a[1] = 7
        >>> b = SharedMemoryArray.from_metadata(a.metadata)  # what another process does
        >>> b.tolist(), b.shm.name == a.shm.name
        ([[0, 0, 0], [7, 7, 7]], True)
        >>> b.unlink_on_del()  # the last user frees the segment
        >>> del a, b
    """

    shm: shared_memory.SharedMemory | None
    _owns_mapping: bool
    _unlink_pid: int | None

    _deletion: ClassVar[_AsyncDeletion | None] = None
    _deletion_lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(
        cls, shape: Iterable[SupportsIndex], dtype: npt.DTypeLike = float
    ) -> SharedMemoryArray:
        dims, kind = _as_shape(shape), _as_dtype(dtype)
        size = math.prod(dims) * kind.itemsize
        if size == 0:
            raise ValueError(
                f"SharedMemoryArray of shape {dims} and dtype {kind} holds no bytes; "
                "a shared-memory segment needs at least one (every dimension >= 1)."
            )
        shm = shared_memory.SharedMemory(create=True, size=size)
        try:
            return cls.from_shared_memory(shm, dims, kind)
        except BaseException:
            shm.close()
            shm.unlink()
            raise

    @classmethod
    def from_shared_memory(
        cls, shm: shared_memory.SharedMemory, shape: Any, dtype: npt.DTypeLike
    ) -> SharedMemoryArray:
        """The array of `shape` and `dtype` at the start of `shm`, which it takes over.

        The array closes `shm` when it is collected, so `shm` may back one
        array only; attach again (`from_metadata`) for a second one.

        Raises:
            ValueError: `shm` is closed, or already backs another array.
            TypeError: `shm` is too small for `shape` and `dtype`.
        """
        dims, kind = _as_shape(shape), _as_dtype(dtype)
        if shm.buf is None:
            raise ValueError(f"Shared memory {shm.name!r} is closed; attach to it again.")
        if shm in _OWNED:
            raise ValueError(
                f"Shared memory {shm.name!r} already backs a SharedMemoryArray, which closes it "
                "when collected; attach again with SharedMemoryArray.from_metadata(a.metadata)."
            )
        needed = math.prod(dims) * kind.itemsize
        if needed > shm.size:
            raise TypeError(
                f"Shared memory {shm.name!r} holds {shm.size} bytes, too few for shape {dims} "
                f"of {kind} ({needed} bytes)."
            )
        array = np.ndarray.__new__(cls, dims, kind, buffer=shm.buf)
        array.shm, array._owns_mapping, array._unlink_pid = shm, True, None
        _OWNED.add(shm)
        return array

    @classmethod
    def from_metadata(cls, metadata: SharedMemoryArrayMetadata) -> SharedMemoryArray:
        """Attaches to the segment `metadata` names (Grain's metadata records work too).

        Raises:
            FileNotFoundError: No segment has that name (it was unlinked).
            TypeError: The segment is too small for the shape and dtype.
        """
        shm = _attach(metadata.name)
        try:
            return cls.from_shared_memory(shm, metadata.shape, metadata.dtype)
        except BaseException:
            shm.close()
            raise

    @classmethod
    def from_array(cls, array: npt.ArrayLike) -> SharedMemoryArray:
        """A copy of `array` in a new segment (a grainfn addition).

        Examples:
            >>> a = SharedMemoryArray.from_array(np.arange(4, dtype=np.int16))
            >>> a, a.dtype
            (SharedMemoryArray([0, 1, 2, 3], dtype=int16), dtype('int16'))
            >>> a.unlink_on_del()
            >>> del a
        """
        values = np.asarray(array)
        copy = cls(values.shape, values.dtype)
        np.copyto(copy, values, casting="no")
        return copy

    @property
    def metadata(self) -> SharedMemoryArrayMetadata:
        """The name, shape and dtype another process needs to attach to this array.

        Raises:
            ValueError: This array is not in shared memory (a `.copy()`), or
                is a view of part of a segment: not C-contiguous, or not
                starting at the segment's first byte.
        """
        owner = self._owner()
        if self.shm is None or owner is None:
            raise ValueError(
                "This SharedMemoryArray is not in shared memory (it is a copy); "
                "SharedMemoryArray.from_array(x) puts one there."
            )
        start = owner.__array_interface__["data"][0]
        if not self.flags.c_contiguous or self.__array_interface__["data"][0] != start:
            raise ValueError(
                f"This array is a view of part of segment {self.shm.name!r}; metadata describes "
                "an array that starts at the segment's first byte and is C-contiguous. "
                "SharedMemoryArray.from_array(view) copies it to a segment of its own."
            )
        return SharedMemoryArrayMetadata(self.shm.name, self.shape, self.dtype)

    def unlink_on_del(self) -> None:
        """Makes this process unlink the segment when the array that maps it is collected.

        On a view, the duty goes to the array it was sliced from, collected
        after all its views. An array not in shared memory has nothing to unlink.
        """
        owner = self._owner()
        if owner is not None:
            owner._unlink_pid = os.getpid()

    def unlink(self) -> None:
        """Unlinks the segment now (a grainfn addition); the memory stays mapped until collected.

        Raises:
            ValueError: This array is not in shared memory.
            FileNotFoundError: The segment was already unlinked.
        """
        if self.shm is None:
            raise ValueError("This SharedMemoryArray is not in shared memory: nothing to unlink.")
        owner = self._owner()
        if owner is not None:
            owner._unlink_pid = None
        self.shm.unlink()

    @classmethod
    def enable_async_del(cls, num_threads: int = 1, max_outstanding_requests: int = 50) -> None:
        """Closes and unlinks collected arrays' segments in background threads, from now on.

        Unmapping a large segment takes time; this takes it off the thread that
        drops the array. Beyond `max_outstanding_requests` waiting, the array
        closes its segment itself. Later calls change nothing; requests still
        waiting at exit are carried out.

        Args:
            num_threads: Threads that close and unlink, at least 1.
            max_outstanding_requests: Requests that may wait, at least 1.
        """
        if num_threads < 1 or max_outstanding_requests < 1:
            raise ValueError(
                "enable_async_del needs num_threads >= 1 and max_outstanding_requests >= 1, got "
                f"num_threads={num_threads}, max_outstanding_requests={max_outstanding_requests}."
            )
        with cls._deletion_lock:
            if SharedMemoryArray._deletion is None:
                SharedMemoryArray._deletion = _AsyncDeletion(num_threads, max_outstanding_requests)

    @classmethod
    def _disable_async_del(cls) -> None:
        """Waits for the requests in flight, then closes segments in the collecting thread."""
        with cls._deletion_lock:
            deletion, SharedMemoryArray._deletion = SharedMemoryArray._deletion, None
        if deletion is not None:
            deletion.executor.shutdown(wait=True)

    @classmethod
    def close_shm_async(cls, shm: shared_memory.SharedMemory, unlink: bool) -> None:
        """Closes `shm` and, if `unlink`, unlinks it: the work a background thread does."""
        _release(shm, unlink)

    def __array_finalize__(self, obj: Any, /) -> None:
        # Views share the segment (to read and to pickle) but never own its mapping.
        parent_shm = getattr(obj, "shm", None)
        shares = parent_shm is not None and np.may_share_memory(self, obj)
        self.shm = parent_shm if shares else None
        self._owns_mapping, self._unlink_pid = False, None

    def __array_wrap__(
        self, array: Any, context: Any = None, return_scalar: bool = False, /
    ) -> Any:
        if array is self:  # a ufunc wrote into this array (out=)
            return array
        if return_scalar:
            return array[()]
        return array.view(np.ndarray)  # results live in private memory: plain arrays

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        try:
            metadata = self.metadata
        except ValueError:  # a copy, or part of a segment: its values
            return self.view(np.ndarray).__reduce_ex__(protocol)
        return type(self).from_metadata, (metadata,)

    def __del__(
        self, _getpid: Any = os.getpid, _release: Any = _release, _close: Any = _close_in_background
    ) -> None:
        # Bound as defaults: module globals may be gone when this runs at interpreter exit.
        shm = getattr(self, "shm", None)
        if shm is None or not getattr(self, "_owns_mapping", False):
            return
        unlink = getattr(self, "_unlink_pid", None) == _getpid()
        deletion = type(self)._deletion
        if deletion is not None and deletion.slots.acquire(blocking=False):
            try:
                deletion.executor.submit(_close, type(self), shm, unlink, deletion)
                return
            except RuntimeError:  # the executor has shut down: the interpreter is exiting
                deletion.slots.release()
        _release(shm, unlink)

    def _owner(self) -> SharedMemoryArray | None:
        """The array that maps this one's segment: itself, or the base it was viewed from."""
        if self.shm is None:
            return None
        node: Any = self
        while isinstance(node, np.ndarray):
            if isinstance(node, SharedMemoryArray) and node._owns_mapping:
                return node if node.shm is self.shm else None
            node = node.base
        return None


def _as_shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(
            f"SharedMemoryArray shape must be a sequence of ints, got {shape!r}."
        ) from None
    if any(d < 0 for d in dims):
        raise ValueError(f"SharedMemoryArray shape {dims} has a negative dimension.")
    return dims


def _as_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    kind = np.dtype(dtype)
    if kind.hasobject:
        raise ValueError(
            f"SharedMemoryArray cannot hold dtype {kind}: it holds Python objects, whose "
            "pointers mean nothing in another process. Use a numeric, bool, bytes (S) or "
            "str (U) dtype."
        )
    return kind


def _attach(name: str) -> shared_memory.SharedMemory:
    try:
        return shared_memory.SharedMemory(name)
    except FileNotFoundError:
        message = f"No shared-memory segment is named {name!r}: it was unlinked, or never made."
        raise FileNotFoundError(message) from None


def _forget_deletion_threads() -> None:
    # A forked child has none of its parent's threads: it closes segments itself.
    SharedMemoryArray._deletion = None
    SharedMemoryArray._deletion_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_deletion_threads)
