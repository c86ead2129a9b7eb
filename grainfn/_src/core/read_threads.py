"""Reading a dataset in threads of given names: where Grain reads its data sources.

Grain's `to_iter_dataset` (and its DataLoader) read a MapDataset in a pool of
`ReadOptions.num_threads` threads named `grain-prefetch_0`, `grain-prefetch_1`,
... (a `concurrent.futures.ThreadPoolExecutor` with that name prefix), in
each worker process too; and data sources observe it: MaxText's Hugging Face
source picks its shard from the number in its thread's name. A dataset read
through `InNamedThreads` is read under such names wherever a block of it is
read: by the consumer, in its own thread named `<prefix>_0` while it reads
(a source sees its thread's name; handing each block to a thread and
waiting for it made cheap pipelines three times slower); ahead of it
(`NamedThreadsExecutor`, a `BlockReader` executor whose blocks run in the
named threads themselves); and in worker processes (a copy of the dataset
makes its own threads, in the process that reads it).

With one thread, every read runs under its name in position order, each
position once: Grain's records for a source that picks its shard by name.
What differs from Grain is only what a name does not show: a block the
consumer reads runs in the consumer's thread, so its thread-local state and
`threading.get_ident()` are the consumer's. The core's own reading
(`fn.from_dataset` without `thread_name`) does not change.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.blocks import ThreadTask, read_in_thread
from grainfn._src.core.dataset import Dataset, ParentIndex, set_length
from grainfn._src.core.executor_policy import DEFAULT_TUNING
from grainfn._src.core.spec_rule import SpecRule

T = TypeVar("T")
R = TypeVar("R")

_TASK_SECONDS = 0.002  # the work of one block read ahead

_in_pool = threading.local()
"""The token of the `NamedThreads` pool the current thread belongs to, if any."""


class NamedThreads:
    """`count` threads named `f"{prefix}_{n}"` for `n < count`, made as reads need them.

    The threads belong to the process that first reads through them: a copy
    (a pickle sent to a worker process, a fork) starts without threads and
    makes its own. They stop when this object is garbage collected.

    Args:
        prefix: The names' prefix, e.g. Grain's `"grain-prefetch"`.
        count: The most threads, at least 1.

    Examples:
        >>> threads = NamedThreads("grain-prefetch", 2)
        >>> threads.names
        ('grain-prefetch_0', 'grain-prefetch_1')
        >>> threads.run(lambda: threading.current_thread().name)
        'grain-prefetch_0'
    """

    def __init__(self, prefix: str, count: int) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"The threads' name prefix must be a non-empty str, got {prefix!r}.")
        self.prefix = prefix
        self.count = validate.check_positive_int(count, "the number of named threads")
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._owner = 0  # the process whose threads `_pool` holds
        self._token = object()  # what the pool's threads hold in `_in_pool`

    @property
    def names(self) -> tuple[str, ...]:
        """The threads' names, in the order they are made."""
        return tuple(f"{self.prefix}_{n}" for n in range(self.count))

    def current(self) -> bool:
        """Whether the calling thread is one of these threads."""
        return getattr(_in_pool, "token", None) is self._token

    def submit(self, function: Callable[..., R], *args: Any) -> concurrent.futures.Future[R]:
        """Runs `function(*args)` in one of the threads, the first idle one or a new one."""
        return self._threads().submit(function, *args)

    def run(self, function: Callable[..., R], *args: Any) -> R:
        """`function(*args)`, run in one of the threads (here, if this is one) and waited for."""
        if self.current():
            return function(*args)
        return self.submit(function, *args).result()

    def as_first(self, function: Callable[..., R], *args: Any) -> R:
        """`function(*args)` in the calling thread, under the first thread's name meanwhile.

        What a source sees of its thread is its name: this gives it that, at the
        cost of two attribute writes, where handing the call to a thread and
        waiting for it costs tens of microseconds a block. In one of the threads
        it runs as it is.

        Examples:
            >>> threads = NamedThreads("reader", 2)
            >>> threads.as_first(lambda: threading.current_thread().name)
            'reader_0'
            >>> threading.current_thread().name
            'MainThread'
        """
        if self.current():
            return function(*args)
        thread = threading.current_thread()
        name, thread.name = thread.name, f"{self.prefix}_0"
        try:
            return function(*args)
        finally:
            thread.name = name

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        pool, pid = self._pool, os.getpid()
        if pool is not None and self._owner == pid:
            return pool
        with self._lock:
            if self._pool is None or self._owner != pid:  # none yet, or a parent's (forked)
                self._token = object()
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self.count,
                    thread_name_prefix=self.prefix,
                    initializer=_enter,
                    initargs=(self._token,),
                )
                self._owner = pid
            return self._pool

    def __reduce__(self) -> tuple[Any, ...]:
        return (NamedThreads, (self.prefix, self.count))  # a copy makes its own threads

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamedThreads):
            return NotImplemented
        return (self.prefix, self.count) == (other.prefix, other.count)

    def __hash__(self) -> int:
        return hash((NamedThreads, self.prefix, self.count))

    def __repr__(self) -> str:
        return f"NamedThreads({self.prefix!r}, {self.count})"


def _enter(token: object) -> None:
    _in_pool.token = token


@dataclasses.dataclass(frozen=True, repr=False)
class InNamedThreads(Dataset[T]):
    """The parent dataset, every read of it run under the name of one of `threads`.

    A read made in one of the threads runs there; any other runs in the
    calling thread under the first thread's name (`NamedThreads.as_first`):
    a block the consumer reads costs nothing more, and a source sees the name
    Grain's would. The elements are the parent's.

    Examples:
        >>> from grainfn import fn
        >>> threads = NamedThreads("reader", 1)
        >>> InNamedThreads(fn.source([5, 6]), threads).get_many([0, 1, 2])
        [5, 6, 5]
        >>> names = fn.map(lambda _: threading.current_thread().name, fn.range(2))
        >>> InNamedThreads(names, threads).get_many([0, 1])
        ['reader_0', 'reader_0']
    """

    parent: Dataset[T]
    threads: NamedThreads
    transparent = True  # the parent's elements, read elsewhere
    spec_rule = SpecRule.PARENT

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return (self.parent,)

    def _get(self, index: int) -> T | None:
        return self.threads.as_first(self.parent._get, index)

    def _get_many(self, indices: np.ndarray) -> list[T | None]:
        return self.threads.as_first(self.parent._get_many, indices)

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)

    def describe_stage(self) -> str:
        return self.parent.describe_stage()


class NamedThreadsExecutor:
    """A `BlockReader`'s thread pool: blocks of `dataset` read ahead in its named threads.

    Made by the reader as it makes threads, once reading is seen to wait (on
    a file, a network): CPU-bound reads stay in the consumer, where threads
    would only slow them down (see `BlockReader`). The threads are the
    dataset's own and outlive the executor: `close` leaves them idle. When
    the reader takes the work back, it takes every block sent too, read or
    not (`keeps_blocks`): no position is read twice, which a source that
    keeps state between reads (one that picks its shard by its thread's
    name) must not see.

    Args:
        dataset: The dataset read, in its threads.
        buffer: The most positions read ahead.
    """

    task_seconds = _TASK_SECONDS
    required_gain = DEFAULT_TUNING.thread_gain
    keeps_blocks = True

    def __init__(self, dataset: InNamedThreads[Any], buffer: int) -> None:
        self.dataset = dataset
        self.max_tasks = validate.check_positive_int(buffer, "buffer")

    def submit(self, first: int, stop: int) -> ThreadTask:
        """Reads positions `[first, stop)` in one of the threads."""
        threads = self.dataset.threads
        return ThreadTask(threads.submit(read_in_thread, self.dataset.parent, first, stop))

    def close(self) -> None:
        """Nothing to stop: the threads are the dataset's (the reader cancels its blocks)."""
