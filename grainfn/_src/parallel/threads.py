"""Reading a dataset's positions in order, in background threads when reading waits.

Threads only help when reading a position waits (on a file, a network, a
sleep) instead of computing: Python code holds the GIL, and then threads make
a pipeline slower, not faster. So the reader starts in the calling thread and
measures each block: when the thread's CPU time is under half the wall time
for two blocks in a row, reading waits, and it hands the positions ahead to a
pool of threads. Cheap pipelines never pay for threads.

Either way blocks come back in position order, so the output and the state
never depend on the number of threads, only the speed does.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
import weakref
from typing import Any

import numpy as np

from grainfn._src.dataset import Dataset

_WAITING_SHARE = 0.5  # CPU time below this share of wall time means reading waits
_WAITING_BLOCKS = 2  # consecutive waiting blocks before threads start
_MIN_BLOCK_SECONDS = 0.0005  # blocks faster than this say nothing about waiting
_TASK_SECONDS = 0.002  # a thread's task reads about this long
_MAX_TASK = 1024


class BlockSizer:
    """Chooses how many positions to read at once: growing while reads are cheap.

    Blocks start at one position (a single `step` reads one element) and double
    while a block takes under 2 ms, up to 1024; a block over 20 ms halves the
    next one, so slow or large elements are not read far ahead. Output never
    depends on the block size, only speed and memory do.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.size = 1
        self.limit = limit
        self._started = 0.0

    def start(self) -> int:
        """Starts timing a block and returns its size."""
        self._started = time.perf_counter()
        return self.size

    def done(self) -> float:
        """Ends the block started last, adapts the next size, and returns the block's seconds."""
        elapsed = time.perf_counter() - self._started
        if elapsed < 0.002:
            self.size = min(self.limit, self.size * 2)
        elif elapsed > 0.02:
            self.size = max(1, self.size // 2)
        return elapsed


class BlockReader:
    """Reads the positions `[position, length)` of a dataset block by block, in order.

    If reading a position fails, the positions before it come first; then the
    error is raised, and the next read tries that position again (so a
    transient failure, such as a network error, can be retried).

    Args:
        dataset: The dataset to read.
        position: The first position to read.
        threads: At most this many threads read ahead once reading is seen to
            wait; 0 reads in the calling thread only.
        buffer: At most this many positions are read ahead of the consumer.
    """

    def __init__(self, dataset: Dataset[Any], position: int, threads: int, buffer: int) -> None:
        self.dataset = dataset
        self.length = dataset.length
        self.position = position  # the first position not yet read or handed to a thread
        self.threads = threads
        self.buffer = max(1, buffer)
        self.sizer = BlockSizer()
        self.waiting_blocks = 0
        self.error: Exception | None = None  # raised by the next read
        self.pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.pending: collections.deque[tuple[int, int, concurrent.futures.Future[Any]]] = (
            collections.deque()
        )
        self.ahead = 0  # positions handed to threads and not yet returned
        self.task_size = 1
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def threaded(self) -> bool:
        """Whether threads read ahead."""
        return self.pool is not None

    def read(self) -> tuple[int, list[Any]]:
        """Returns `(first position, elements)` of the next block; StopIteration at the end."""
        if self.error is not None:
            failure, self.error = self.error, None
            raise failure
        if self.pool is not None:
            return self._collect()
        first = self.position
        if first >= self.length:
            raise StopIteration
        stop = min(self.length, first + self.sizer.start())
        cpu = time.thread_time()
        block, error = read_block(self.dataset, first, stop)
        cpu = time.thread_time() - cpu
        wall = self.sizer.done()
        self.position = first + len(block)
        if error is not None:
            return self._fail(first, block, error)
        if self.threads and wall > _MIN_BLOCK_SECONDS and cpu < _WAITING_SHARE * wall:
            self.waiting_blocks += 1
            if self.waiting_blocks >= _WAITING_BLOCKS:
                self.start_threads(seconds_per_element=wall / (stop - first))
        else:
            self.waiting_blocks = 0
        return first, block

    def start_threads(self, seconds_per_element: float = _TASK_SECONDS) -> None:
        """Starts reading ahead in threads now (if this reader may use threads at all)."""
        if self.pool is not None or not self.threads:
            return
        self.task_size = _task_size(seconds_per_element)
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix="grainfn-read"
        )
        self._finalizer = weakref.finalize(self, _shutdown, self.pool)
        self._submit()

    def close(self) -> None:
        """Stops the threads and drops what they read ahead."""
        if self._finalizer is not None:
            self._finalizer()
        self.pool = None
        self._drop_pending()

    def _submit(self) -> None:
        assert self.pool is not None
        while self.ahead < self.buffer and self.position < self.length:
            first = self.position
            stop = min(self.length, first + self.task_size)
            future = self.pool.submit(_read_timed, self.dataset, first, stop)
            self.pending.append((first, stop, future))
            self.ahead += stop - first
            self.position = stop

    def _collect(self) -> tuple[int, list[Any]]:
        self._submit()
        if not self.pending:
            self.close()  # everything is read: the threads have nothing left to do
            raise StopIteration
        first, stop, future = self.pending.popleft()
        block, error, seconds = future.result()
        self.ahead -= stop - first
        if error is not None:
            self._drop_pending()
            self.position = first + len(block)
            return self._fail(first, block, error)
        self.task_size = _task_size(seconds / len(block))
        self._submit()  # keep the threads busy while the consumer works on this block
        return first, block

    def _fail(self, first: int, block: list[Any], error: Exception) -> tuple[int, list[Any]]:
        if not block:
            raise error
        self.error = error  # the elements before the failure come first
        return first, block

    def _drop_pending(self) -> None:
        for _, _, future in self.pending:
            future.cancel()
        self.pending.clear()
        self.ahead = 0


def read_block(dataset: Dataset[Any], first: int, stop: int) -> tuple[list[Any], Exception | None]:
    """The elements at `[first, stop)`, or those before the first that fails and its error."""
    try:
        return dataset._get_many(np.arange(first, stop, dtype=np.int64)), None
    except Exception:
        block = []
        for position in range(first, stop):
            try:
                block.append(dataset._get(position))
            except Exception as error:
                return block, error
        return block, None  # the failure did not happen again


def _read_timed(
    dataset: Dataset[Any], first: int, stop: int
) -> tuple[list[Any], Exception | None, float]:
    started = time.perf_counter()
    block, error = read_block(dataset, first, stop)
    return block, error, time.perf_counter() - started


def _task_size(seconds_per_element: float) -> int:
    if seconds_per_element <= 0:
        return _MAX_TASK
    return int(min(_MAX_TASK, max(1, _TASK_SECONDS // seconds_per_element)))


def _shutdown(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)
