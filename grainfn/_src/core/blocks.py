"""Reading a dataset's positions in order, block by block, in the calling thread or ahead of it.

A `BlockReader` hands out consecutive blocks of positions. It reads them in
the calling thread, or hands them ahead of time to an executor: a thread pool
(`ReadOptions`) or worker processes (`mp_prefetch`). Either way blocks come back
in position order, so the output and the state never depend on how they were
read, only the speed does.

Threads only help when reading a position waits (on a file, a network, a
sleep) instead of computing: Python code holds the GIL, and then threads make
a pipeline slower, not faster. So a reader allowed threads starts in the
calling thread and measures each block: when the thread's CPU time is under
a quarter of the wall time for three blocks in a row, reading waits, and it hands the
positions ahead to a pool of threads. Cheap pipelines never pay for threads.
Because a shared machine can also make a thread wait (another process took
its core), the threads must then prove themselves: if the consumer does not
wait at least 1.5x less per element than reading in its own thread cost, the
reader goes back to its own thread, and tries threads again later, less and
less often.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from grainfn._src.core.dataset import Dataset

_WAITING_SHARE = 0.25  # CPU time below this share of wall time means reading waits
WAITING_BLOCKS = 3  # consecutive waiting blocks before threads start
_TRIAL_TASKS = 4  # tasks over which threads must prove faster than this thread
_REQUIRED_GAIN = 1.5  # how much less threads must keep the consumer waiting
_FIRST_BACKOFF = 16  # blocks in this thread before threads are tried again (then doubled)
_MIN_BLOCK_SECONDS = 0.0005  # blocks faster than this say nothing about waiting
MAX_TASK = 1024

Result = tuple[list[Any], Exception | None, float]
"""What an executor's task gives: the elements, the error that stopped it, and its seconds."""


class Task(Protocol):
    """A block being read ahead."""

    def result(self) -> Result:
        """Waits for the block and returns it."""
        ...

    def cancel(self) -> bool:
        """Drops the block if it has not started."""
        ...


class Executor(Protocol):
    """Reads blocks of positions ahead of the consumer."""

    task_seconds: float  # how long one task should take
    max_tasks: int  # the most tasks in flight

    def submit(self, first: int, stop: int) -> Task:
        """Starts reading positions `[first, stop)`."""
        ...

    def close(self) -> None:
        """Stops reading ahead."""
        ...


def reading_waits(cpu: float, wall: float) -> bool:
    """Whether a read of `wall` seconds that took `cpu` seconds of its thread's CPU waited.

    A read that waits (on a file, a network) is what threads speed up; one
    too short to judge says nothing.
    """
    return wall > _MIN_BLOCK_SECONDS and cpu < _WAITING_SHARE * wall


def threads_keep_up(waited_per_element: float, own_cost: float) -> bool:
    """Whether threads earn their place: the consumer waits 1.5 times less for their reads.

    Per element, against `own_cost`, the seconds reading in the consumer's own
    thread costs (0 if unknown: threads are kept until it is known).

    Examples:
        >>> threads_keep_up(0.001, 0.002), threads_keep_up(0.0015, 0.002)
        (True, False)
    """
    return own_cost <= 0 or waited_per_element * _REQUIRED_GAIN <= own_cost


def next_block_size(size: int, seconds: float, limit: int = MAX_TASK) -> int:
    """The size of the block after one of `size` positions that took `seconds` to read.

    Grows 16 times after a block under 0.05 ms, four times under 0.5 ms and
    twice under 2 ms, up to `limit`; halves after one over 20 ms, so slow or
    large elements are not read far ahead.

    Examples:
        >>> next_block_size(1, 0.00001), next_block_size(64, 0.001), next_block_size(64, 0.03)
        (16, 128, 32)
        >>> next_block_size(512, 0.0, limit=1024)
        1024
    """
    if seconds < 0.00005:  # nearly free: a block 16 times as big is still cheap
        return min(limit, size * 16)
    if seconds < 0.0005:  # far below: grow faster, so cheap reads soon come in big blocks
        return min(limit, size * 4)
    if seconds < 0.002:
        return min(limit, size * 2)
    if seconds > 0.02:
        return max(1, size // 2)
    return size


class BlockSizer:
    """Chooses how many positions to read at once: growing while reads are cheap.

    Blocks start at one position (a single `step` reads one element) and
    follow `next_block_size`. Output never depends on the block size, only
    speed and memory do.

    Args:
        limit: The largest block.
        clock: Seconds on a monotonic clock; a test may pass its own.
    """

    def __init__(self, limit: int = MAX_TASK, clock: Callable[[], float] = time.perf_counter):
        self.size = 1
        self.limit = limit
        self.clock = clock
        self._started = 0.0

    def start(self, at_least: int = 1) -> int:
        """Starts timing a block and returns its size: `at_least` positions, up to the limit.

        A reader asked for `at_least` elements at once reads them in one block,
        since they are all needed before anything else happens; the next
        block grows from that size.
        """
        self._started = self.clock()
        self.size = min(self.limit, max(self.size, at_least))
        return self.size

    def done(self, parts: int = 1) -> float:
        """Ends the block started last, adapts the next size, and returns the block's seconds.

        Args:
            parts: How many blocks of this size were read together (one per
                logical shard, say); each part's time is judged.
        """
        elapsed = (self.clock() - self._started) / parts
        self.size = next_block_size(self.size, elapsed, self.limit)
        return elapsed


class BlockReader:
    """Reads the positions `[position, length)` of a dataset block by block, in order.

    If reading a position fails, the positions before it come first; then the
    error is raised, and the next read tries that position again (so a
    transient failure, such as a network error, can be retried). The same
    holds when waiting for a block read ahead fails: the next read starts at
    that block.

    Args:
        dataset: The dataset to read.
        position: The first position to read.
        threads: At most this many threads read ahead once reading is seen to
            wait; 0 reads in the calling thread only.
        buffer: At most this many positions are read ahead of the consumer.
        executor: Reads ahead from the start (worker processes), instead of threads.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        position: int,
        threads: int = 0,
        buffer: int = 500,
        executor: Executor | None = None,
    ) -> None:
        self.dataset = dataset
        self.length = dataset.length
        self.position = position  # the first position not yet read or handed to the executor
        self.threads = threads
        self.buffer = max(1, buffer)
        self.sizer = BlockSizer()
        self.waiting_blocks = 0
        self.error: Exception | None = None  # raised by the next read
        self.executor = executor
        self.reads_ahead = False  # whether threads or processes read ahead
        self.pending: collections.deque[tuple[int, int, Task]] = collections.deque()
        self.ahead = 0  # positions handed to the executor and not yet returned
        self.task_size = 1
        self.own_costs: collections.deque[float] = collections.deque(maxlen=8)
        self.trial = [0.0, 0, 0]  # threads on trial: seconds waited, elements, tasks
        self.blocks_before_threads = 0
        self.backoff = _FIRST_BACKOFF

    @property
    def own_cost(self) -> float:
        """Seconds per element reading in the calling thread: the least of the last blocks.

        The least, because small blocks carry a fixed cost and a shared machine
        can stall any block; 0 when nothing was read in the calling thread yet.
        """
        return min(self.own_costs, default=0.0)

    def read(self, at_least: int = 1) -> tuple[int, list[Any]]:
        """Returns `(first position, elements)` of the next block; StopIteration at the end.

        Args:
            at_least: Positions the caller needs now; read in the calling
                thread, the block is at least that long (up to the block limit).
        """
        if self.error is not None:
            failure, self.error = self.error, None
            raise failure
        if self.executor is not None and not self.reads_ahead:
            self.start()
        if self.reads_ahead:
            return self._collect()
        first = self.position
        if first >= self.length:
            raise StopIteration
        stop = min(self.length, first + self.sizer.start(at_least))
        cpu = time.thread_time()
        block, error = read_block(self.dataset, first, stop)
        cpu = time.thread_time() - cpu
        wall = self.sizer.done()
        self.position = first + len(block)
        if error is not None:
            return self._fail(first, block, error)
        self.own_costs.append(wall / (stop - first))
        self.blocks_before_threads = max(0, self.blocks_before_threads - 1)
        if self.threads and reading_waits(cpu, wall):
            self.waiting_blocks += 1
            if self.waiting_blocks >= WAITING_BLOCKS and not self.blocks_before_threads:
                self.start(seconds_per_element=self.own_cost)
        else:
            self.waiting_blocks = 0
        return first, block

    def start(self, seconds_per_element: float | None = None) -> None:
        """Starts reading ahead now (if this reader may use threads or processes at all)."""
        if self.reads_ahead or not (self.threads or self.executor):
            return
        if self.executor is None:
            self.executor = ThreadExecutor(self.dataset, self.threads, self.buffer)
        if seconds_per_element is not None:
            self.task_size = _task_size(seconds_per_element, self.executor.task_seconds)
        self.reads_ahead = True
        self.trial = [0.0, 0, 0]
        self._submit()

    def close(self) -> None:
        """Stops reading ahead and drops what was read ahead; later reads are in this thread."""
        self._drop_pending()
        if self.executor is not None:
            self.executor.close()
        self.executor = None
        self.threads = 0
        self.reads_ahead = False

    def _submit(self) -> None:
        executor = self.executor
        assert executor is not None
        while (
            self.ahead < self.buffer
            and len(self.pending) < executor.max_tasks
            and self.position < self.length
        ):
            first = self.position
            stop = min(self.length, first + self.task_size)
            self.pending.append((first, stop, executor.submit(first, stop)))
            self.ahead += stop - first
            self.position = stop

    def _collect(self) -> tuple[int, list[Any]]:
        self._submit()
        if not self.pending:
            self.close()  # everything is read: the executor has nothing left to do
            raise StopIteration
        first, stop, task = self.pending.popleft()
        started = time.perf_counter()
        try:
            block, error, seconds = task.result()
        except BaseException:  # the executor failed (Ctrl-C while waiting, say): keep the block
            self._drop_pending()
            self.position = first
            raise
        waited = time.perf_counter() - started
        self.ahead -= stop - first
        if error is not None:
            self._drop_pending()
            self.position = first + len(block)
            return self._fail(first, block, error)
        executor = self.executor
        assert executor is not None
        if isinstance(executor, ThreadExecutor) and self._threads_lose(waited, len(block)):
            self._back_to_this_thread(first + len(block))
            return first, block
        self.task_size = _task_size(seconds / len(block), executor.task_seconds)
        self._submit()  # keep the executor busy while the consumer works on this block
        return first, block

    def _threads_lose(self, waited: float, elements: int) -> bool:
        """Whether threads, on trial, keep the consumer waiting about as long as no threads."""
        trial = self.trial
        trial[0] += waited
        trial[1] += elements
        trial[2] += 1
        if trial[2] < _TRIAL_TASKS:
            return False
        waited_per_element = trial[0] / trial[1]
        self.trial = [0.0, 0, 0]  # judge again over the next tasks
        return not threads_keep_up(waited_per_element, self.own_cost)

    def _back_to_this_thread(self, position: int) -> None:
        self._drop_pending()
        if self.executor is not None:
            self.executor.close()
        self.executor = None
        self.reads_ahead = False
        self.position = position
        self.waiting_blocks = 0
        self.blocks_before_threads = self.backoff
        self.backoff *= 2

    def _fail(self, first: int, block: list[Any], error: Exception) -> tuple[int, list[Any]]:
        if not block:
            raise error
        self.error = error  # the elements before the failure come first
        return first, block

    def _drop_pending(self) -> None:
        for _, _, task in self.pending:
            task.cancel()
        self.pending.clear()
        self.ahead = 0


class ThreadExecutor:
    """Reads blocks in a pool of threads; stops them when closed or garbage collected."""

    task_seconds = 0.002

    def __init__(self, dataset: Dataset[Any], threads: int, buffer: int) -> None:
        self.dataset = dataset
        self.max_tasks = buffer
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="grainfn-read"
        )
        self._finalizer = weakref.finalize(self, _shutdown, self.pool)

    def submit(self, first: int, stop: int) -> Task:
        return self.pool.submit(read_timed, self.dataset, first, stop)

    def close(self) -> None:
        self._finalizer()


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


def read_timed(dataset: Dataset[Any], first: int, stop: int) -> Result:
    """`read_block` and the seconds it took."""
    started = time.perf_counter()
    block, error = read_block(dataset, first, stop)
    return block, error, time.perf_counter() - started


def _task_size(seconds_per_element: float, task_seconds: float) -> int:
    if seconds_per_element <= 0:
        return MAX_TASK
    return int(min(MAX_TASK, max(1, task_seconds // seconds_per_element)))


def _shutdown(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)
