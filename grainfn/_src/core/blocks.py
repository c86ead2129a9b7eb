"""Reading a dataset's positions in order, block by block, in the calling thread or ahead of it.

A `BlockReader` hands out consecutive blocks of positions. It reads them in
the calling thread, or hands them ahead of time to an executor: a thread pool
(`ReadOptions`), worker processes (`mp_prefetch`) or Ray actors
(`ray_prefetch`). Either way blocks come back in position order, so the
output and the state never depend on how they were read, only the speed does.

Where each block is read is the `ExecutorPolicy`'s decision
(`core/executor_policy.py`), from the costs the reader measures on its
`Clock` and gives it: the reader does what it decides, and keeps the blocks
in order. Worker processes and actors stay up, idle, while the consumer
reads (their owner closes them); an executor with a `note_fallback` method
is told each time the work is settled in the consumer (`Fallback`). While
the consumer waits for an executor that leaves it a core, it reads the next
blocks itself (`BlockReader._help`), queued among the executor's in order.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.executor_policy import (
    DEFAULT_TUNING,
    SYSTEM_CLOCK,
    Clock,
    Decision,
    ExecutorPolicy,
    Tuning,
    reading_waits,
)

Result = tuple[list[Any], Exception | None, float]
"""What an executor's task gives: the elements, the error that stopped it, and its seconds."""


class Task(Protocol):
    """A block being read ahead.

    A task may also have `done()`, which says without waiting whether its
    block has come: while the first block in flight has not, the reader
    reads the next ones itself (see `BlockReader`).
    """

    def result(self) -> Result:
        """Waits for the block and returns it."""
        ...

    def cancel(self) -> bool:
        """Drops the block if it has not started."""
        ...


class Executor(Protocol):
    """Reads blocks of positions ahead of the consumer.

    Six attributes are optional, read where present: `consumer_helps`,
    whether the consumer reading while it waits adds to the executor (it has
    a core the executor leaves idle: see `BlockReader._help`); `keeps_blocks` (see
    `ThreadExecutor`); `required_gain`, how many times less the consumer must
    wait per element than reading in its own thread costs for the executor to
    keep the work (1 when absent: it only has to be faster); `ready()`, which
    starts the executor if it has not started and says, without waiting,
    whether it can take blocks now (the reader reads in its own thread until
    it can); `start_seconds()`, about what readying it costs; and
    `note_fallback(figures)`, called with a `Fallback` each time the reader
    takes the work back into the consumer's thread.
    """

    @property
    def task_seconds(self) -> float:
        """How long one task should take."""
        ...

    @property
    def max_tasks(self) -> int:
        """The most tasks in flight."""
        ...

    def submit(self, first: int, stop: int) -> Task:
        """Starts reading positions `[first, stop)`."""
        ...

    def close(self) -> None:
        """Stops reading ahead."""
        ...


class Meter:
    """Seconds the consumer has spent inside a pipeline's `next`, all told: its cost of the data.

    Given to a `BlockReader` (by `mp_prefetch` and `ray_prefetch`, which time
    their cursor's `next`), it judges each side by what an element costs the
    consumer in the end: the read or the wait, and the stream stages above it
    (a batch stacks the contiguous rows workers send faster than the views
    that reading here gives), never the consumer's own code.

    Args:
        clock: What its owner times `next` by: the reader's clock.
    """

    __slots__ = ("clock", "seconds")

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.seconds = 0.0


def next_block_size(size: int, seconds: float, limit: int = DEFAULT_TUNING.max_task) -> int:
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
        clock: The time blocks are measured by; a test may pass its own.
    """

    def __init__(self, limit: int = DEFAULT_TUNING.max_task, clock: Clock = SYSTEM_CLOCK):
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
        self._started = self.clock.now()
        self.size = min(self.limit, max(self.size, at_least))
        return self.size

    def done(self, parts: int = 1) -> float:
        """Ends the block started last, adapts the next size, and returns the block's seconds.

        Args:
            parts: How many blocks of this size were read together (one per
                logical shard, say); each part's time is judged.
        """
        elapsed = (self.clock.now() - self._started) / parts
        self.size = next_block_size(self.size, elapsed, self.limit)
        return elapsed


class BlockReader:
    """Reads the positions `[position, length)` of a dataset block by block, in order.

    Where each block is read is its `policy`'s decision (an `ExecutorPolicy`),
    from the costs it measures on `clock`: the reader measures, asks, and
    does what is decided. While the executor has the work, the reader reads
    blocks itself in the time it would wait for it (`_help`).

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
        buffer: At most this many positions are read ahead of the consumer;
            None: as many as the executor's `max_tasks` tasks hold (worker
            processes and actors, whose tasks are sized by their time).
        executor: Reads ahead from the start (worker processes, Ray actors),
            instead of threads; the reader never closes it for good before its
            own `close`.
        adaptive: Whether the executor is on trial (see `ExecutorPolicy`):
            False leaves every block to it.
        read_while_starting: Whether the reader reads in its own thread
            while the executor starts; None: as `adaptive`.
        clock: The time costs are measured by (wall and thread CPU); a test
            may pass one it moves.
        tuning: The policy's constants.
        meter: The consumer's time inside the pipeline (see `Meter`): with
            it, what the stages above the read cost per element counts too.
        thread_pool: Makes the executor of the `threads`, once reading is
            seen to wait (threads of given names, say); a `ThreadExecutor`
            by default.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        position: int,
        threads: int = 0,
        buffer: int | None = 500,
        executor: Executor | None = None,
        adaptive: bool = True,
        read_while_starting: bool | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tuning: Tuning = DEFAULT_TUNING,
        meter: Meter | None = None,
        thread_pool: Callable[[], Executor] | None = None,
    ) -> None:
        self.dataset = dataset
        self.length = dataset.length
        self.position = position  # the first position not yet read or handed to the executor
        self.threads = threads
        self.buffer = None if buffer is None else max(1, buffer)
        self.clock = clock
        self.policy = ExecutorPolicy(tuning, clock, adaptive, read_while_starting)
        self.sizer = BlockSizer(tuning.max_task, clock)
        self.error: Exception | None = None  # raised by the next read
        self.ready: tuple[int, list[Any]] | None = None  # a block read, not handed out yet
        self.executor = executor
        self.thread_pool = thread_pool
        self.owned = False  # whether the reader made its executor (threads): closed when idle
        self.started = False  # whether the executor ever read ahead
        self.read_here = 0  # elements read in the consumer's thread, and by the executor
        self.read_ahead = 0
        self.reads_ahead = False  # whether threads, processes or actors read ahead now
        self.draining = False  # the executor lost: its blocks in flight are taken, no more sent
        self.pending: collections.deque[tuple[int, int, Task]] = collections.deque()
        self.task_size = 1
        self.here_from = position  # where the consumer last took the work back
        self.meter = meter
        self.handed: tuple[bool, float, int, float] | None = None  # the last block (`_note`)
        self.block_seconds = (False, 0.0)  # how the block now read came, and its seconds
        # Processes or actors that leave it a core: the consumer reads too while it waits,
        # as long as they are on trial (`_help`).
        self.helps = bool(getattr(executor, "consumer_helps", False))
        self.read_here_ahead = 0  # blocks `_help` read, in `pending`
        self.help_excess = 0.0  # what they cost beyond reading here alone (see `_help`)

    @property
    def ahead(self) -> int:
        """Positions handed to the executor and not yet returned."""
        return sum(stop - first for first, stop, _ in self.pending)

    @property
    def fallbacks(self) -> int:
        """How many times the work came back to the consumer."""
        return self.policy.fallbacks

    @property
    def here_seconds(self) -> float:
        """Seconds spent reading in the consumer's thread."""
        return self.policy.here_seconds

    def read(self, at_least: int = 1) -> tuple[int, list[Any]]:
        """Returns `(first position, elements)` of the next block; StopIteration at the end.

        Args:
            at_least: Positions the caller needs now; read in the calling
                thread, the block is at least that long (up to the block limit).
        """
        meter = self.meter
        if meter is None:
            return self._read(at_least)
        self._note_above(meter.seconds)
        self.block_seconds = (False, 0.0)
        first, block = self._read(at_least)
        if block:
            self.handed = (*self.block_seconds, len(block), meter.seconds)
        return first, block

    def _note_above(self, now: float) -> None:
        """Notes what the stages above cost per element of the last block, by the meter.

        The meter moves when a `next` of the pipeline returns: between two
        reads it moved by all that the last block cost the consumer, the read
        included. A block used up within the `next` that read it shows no move,
        and says nothing.
        """
        if self.handed is None:
            return
        ahead, seconds, elements, then = self.handed
        self.handed = None
        self.policy.note_above(ahead, (now - then - seconds) / elements)

    def _read(self, at_least: int) -> tuple[int, list[Any]]:
        if self.ready is not None:
            taken, self.ready = self.ready, None
            return taken
        if self.error is not None:
            raise self._take_error()
        if self.executor is not None and not self.started and self._executor_ready():
            # Processes or actors read from the start, or from when they are ready.
            self.start(seconds_per_element=self.policy.own_cost or None)
        if self.reads_ahead:
            return self._collect()
        first = self.position
        if first >= self.length:
            raise StopIteration
        stop = min(self.length, first + self.sizer.start(at_least))
        cpu = self.clock.cpu()
        block, self.error = read_block(self.dataset, first, stop)
        cpu = self.clock.cpu() - cpu
        wall = self.sizer.done()
        self.position = first + len(block)
        self.read_here += len(block)
        self.policy.spent_here(wall)
        if self.error is not None:
            return self._fail(first, block)
        self.block_seconds = (False, wall)
        self._after_own_block(wall / (stop - first), reading_waits(cpu, wall, self.policy.tuning))
        return first, block

    def start_prefetch(self) -> None:
        """Starts reading ahead before the first read; an executor still starting only starts."""
        self.policy.ask_to_start()
        if self.executor is not None and not self.started and not self._executor_ready():
            return  # `read` hands it the work once it is ready
        self.start(seconds_per_element=self.policy.own_cost or None)

    def start(self, seconds_per_element: float | None = None) -> None:
        """Starts reading ahead now (if this reader may use threads or processes at all)."""
        if self.reads_ahead or not (self.threads or self.executor):
            return
        if self.executor is None:
            pool, gain = self.thread_pool, self.policy.tuning.thread_gain
            self.executor = (
                ThreadExecutor(self.dataset, self.threads, self.buffer or self.threads, gain)
                if pool is None
                else pool()
            )
            self.owned = True
        executor = self.executor
        # Starting processes or actors takes seconds: unless the executor said it was
        # ready, the whole first round waited for it.
        waited_ready = self.policy.read_while_starting and hasattr(executor, "ready")
        first_round = self.started or self.owned or waited_ready
        self.policy.executor_starts(
            gain=getattr(executor, "required_gain", 1.0),
            uncounted=1 if first_round else executor.max_tasks,
        )
        if seconds_per_element is not None:
            self.task_size = self.policy.task_size(
                executor.task_seconds, seconds_per_element, starting=True
            )
        self.started = self.reads_ahead = True
        self._submit()

    def close(self) -> None:
        """Stops reading ahead and drops what was read ahead; later reads are in this thread."""
        self._drop_pending()
        if self.executor is not None:
            self.executor.close()
        self.executor = None
        self.threads = 0
        self.reads_ahead = self.draining = False

    def _submit(self) -> None:
        executor = self.executor
        assert executor is not None
        while (
            (self.buffer is None or self.ahead < self.buffer)
            and len(self.pending) - self.read_here_ahead < executor.max_tasks
            and self.position < self.length
        ):
            first = self.position
            stop = min(self.length, first + self.task_size)
            try:
                self.pending.append((first, stop, executor.submit(first, stop)))
                self.position = stop
            except BaseException:  # Ctrl-C between the steps: the blocks in flight say where
                self.position = self.pending[-1][1] if self.pending else first
                raise

    def _collect(self) -> tuple[int, list[Any]]:
        if not self.draining:
            self._submit()
        if not self.pending:
            self.close()  # everything is read: the executor has nothing left to do
            raise StopIteration
        first, stop = self.pending[0][:2]
        if isinstance(self.pending[0][2], ReadHere):
            return self._take_read_here()
        try:  # no local holds the task: what it raised holds this frame
            self._help()
            started = self.clock.now()
            block, self.error, seconds = self.pending[0][2].result()
        except BaseException as failure:  # the executor failed (Ctrl-C while waiting, say)
            self._after_failure(first, isinstance(failure, Exception))  # the block is read again
            raise
        self.pending.popleft()
        failed = self.error is not None
        waited = self.clock.now() - started + self.help_excess
        self.help_excess = 0.0
        try:
            return self._taken(first, stop, block, failed, seconds, waited)
        except BaseException:  # Ctrl-C before the block was handed out: the next read has it
            if not failed:
                self.ready = (first, block)
            raise

    def _help(self) -> None:
        """While the executor's first block in flight is not back, reads the next ones here.

        The consumer would only wait: it reads the positions after the last
        block handed out (the executor's blocks, at most `MAX_READ_HERE` of
        its own, in order) and queues them as blocks read here. A reader
        only waits where its executor takes every core (no `consumer_helps`),
        is pinned (not `adaptive`, or since a block failed there: see
        `ExecutorPolicy.executor_failed`), or has tasks that cannot say they
        are done without waiting.

        What reading here costs beyond reading here alone (the executor's
        processes take the consumer's cores) is added to the wait for the
        executor's next block, so the trial judges the executor by what it
        costs the consumer in all.
        """
        if not (self.helps and self.policy.adaptive) or self.draining:
            return  # pinned, or a block failed there: no position may be read here
        done = getattr(self.pending[0][2], "done", None)
        while (
            done is not None
            and self.read_here_ahead < MAX_READ_HERE
            and self.position < self.length
            and not done()
        ):
            first = self.position
            stop = min(self.length, first + self.task_size)
            started = self.clock.now()
            block, error = read_block(self.dataset, first, stop)
            wall = self.clock.now() - started
            self.position = first + len(block)  # a failed position: the executor's next
            if block or error is not None:
                self.pending.append((first, self.position, ReadHere(block, error, wall)))
                self.read_here_ahead += 1
            if error is not None:
                return
            own = self.policy.own_cost
            if own > 0:
                self.help_excess += max(0.0, wall - own * len(block))

    def _take_read_here(self) -> tuple[int, list[Any]]:
        """Hands out the block `_help` read here, first in line now."""
        first, _, task = self.pending.popleft()
        self.read_here_ahead -= 1
        block, self.error, seconds = task.result()
        self.read_here += len(block)
        self.policy.spent_here(seconds)
        self.block_seconds = (False, 0.0)  # read while the consumer waited: it costs nothing now
        if self.draining and not self.pending:  # the executor lost: the rest is read here
            self._read_here()
        if self.error is not None:
            return self._fail(first, block)
        return first, block

    def _taken(
        self, first: int, stop: int, block: list[Any], failed: bool, seconds: float, waited: float
    ) -> tuple[int, list[Any]]:
        """Hands out a block the executor read, asking the policy, and keeps the executor busy."""
        assert self.executor is not None
        self.read_ahead += len(block)
        self.block_seconds = (True, waited)
        if failed:
            self._after_failure(first + len(block), True)
            return self._fail(first, block)
        self.task_size = self.policy.task_size(self.executor.task_seconds, seconds / len(block))
        if self.draining:
            if not self.pending:
                self._read_here()
            return first, block
        decision = self.policy.executor_block(waited, len(block), seconds, own_threads=self.owned)
        if decision is not Decision.TAKE_BACK:
            self._submit()  # keep the executor busy while the consumer works on this block
        elif self.owned and not getattr(self.executor, "keeps_blocks", False):
            # Threads: what they have not started is dropped, and read here.
            self._drop_pending()
            self.position = first + len(block)
            self._read_here()
        else:  # processes, actors, named threads: what they read is taken (see
            # `ThreadExecutor.keeps_blocks`), and they are left idle
            self.draining = True
            if not self.pending:
                self._read_here()
        return first, block

    def _after_failure(self, position: int, failed: bool) -> None:
        """Drops the blocks in flight; the next read starts at `position`, with the executor.

        A block that failed on worker processes or actors keeps the work there
        (see `ExecutorPolicy.executor_failed`).
        """
        self._drop_pending()
        self.position = position
        self.draining = False
        self.policy.executor_failed(for_good=failed and not self.owned)

    def _read_here(self) -> None:
        """Takes the work back into this thread, from `self.position` on, and measures it."""
        if self.owned:
            assert self.executor is not None
            self.executor.close()
            self.executor = None
        self.reads_ahead = self.draining = False
        self.here_from = self.position
        self.policy.takes_back()
        # Blocks a quarter of the executor's: cheap enough to measure often, big enough
        # that a block's fixed cost does not count.
        self.sizer.size = max(1, min(self.sizer.limit, self.task_size // 4))

    def _executor_ready(self) -> bool:
        """Whether to start the executor now: it is ready, or the reader may not read here.

        An executor with `ready` is asked (which starts it) when the policy
        allows (`ExecutorPolicy.starting`); one without is started at once.
        """
        ready = getattr(self.executor, "ready", None)
        if ready is None or not self.policy.read_while_starting:
            return True
        start_seconds = getattr(self.executor, "start_seconds", None)
        if self.policy.starting(start_seconds) is Decision.KEEP:
            return False
        return bool(ready())

    def _after_own_block(self, seconds_per_element: float, waited: bool) -> None:
        """Does what the policy decides after a block read here (see `ExecutorPolicy.own_block`)."""
        decision = self.policy.own_block(
            seconds_per_element,
            waited,
            executor=self.executor is not None,
            starting=not self.started,
            threads=bool(self.threads),
        )
        if decision is Decision.HAND_OVER:
            self.start(seconds_per_element=self.policy.own_cost)
        elif decision is Decision.RETRY:
            self.start()
        elif decision is Decision.FALL_BACK:
            note = getattr(self.executor, "note_fallback", None)
            if note is not None:
                note(self.policy.fallback(self.here_from))

    def _fail(self, first: int, block: list[Any]) -> tuple[int, list[Any]]:
        """Hands out the elements before the failure; the error, in `self.error`, comes next."""
        if not block:
            raise self._take_error()
        return first, block

    def _take_error(self) -> Exception:
        """The error to raise now, forgotten here.

        Raised as `raise self._take_error()`, it is held by no local variable of
        the frames it passes through: one that held it would hold its traceback,
        which holds that frame, and that cycle would keep the reader, and the
        worker processes it owns, alive until the garbage collector runs.
        """
        error, self.error = self.error, None
        assert error is not None
        return error

    def _drop_pending(self) -> None:
        for _, _, task in self.pending:
            task.cancel()
        self.pending.clear()
        self.read_here_ahead = 0


MAX_READ_HERE = 2
"""The most blocks a consumer reads ahead of its executor's while it waits (see `BlockReader`)."""


class ReadHere(NamedTuple):
    """A block the consumer read while it waited for the executor's (`BlockReader._help`)."""

    block: list[Any]
    error: Exception | None
    seconds: float

    def result(self) -> Result:
        return self.block, self.error, self.seconds

    def cancel(self) -> bool:
        return True


class ThreadExecutor:
    """Reads blocks in a pool of threads; stops them when closed or garbage collected."""

    task_seconds = 0.002
    keeps_blocks = False
    """Whether a reader that takes the work back takes the blocks sent too, read or not: a
    reader's thread pool may say so (`BlockReader`'s `thread_pool`) where no position may be
    read twice; these threads' blocks not started are dropped, and read by the consumer."""

    def __init__(
        self,
        dataset: Dataset[Any],
        threads: int,
        buffer: int,
        required_gain: float = DEFAULT_TUNING.thread_gain,
    ) -> None:
        self.dataset = dataset
        self.max_tasks = buffer
        self.required_gain = required_gain  # see `Tuning.thread_gain`
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="grainfn-read"
        )
        self._finalizer = weakref.finalize(self, _shutdown, self.pool)

    def submit(self, first: int, stop: int) -> Task:
        return ThreadTask(self.pool.submit(read_in_thread, self.dataset, first, stop))

    def close(self) -> None:
        self._finalizer()


class BlockReadError(Exception):
    """A block a thread read, with the error that stopped it: raised in the thread, not returned.

    The pool's work item lets go of what its function raises, but a frame of
    the thread keeps the work item, and with it the future, while holding what
    the function returned. A returned error holds its traceback, which holds
    the thread's frames: that cycle would keep the block and the error alive
    until the garbage collector runs.
    """

    def __init__(self, result: Result) -> None:
        super().__init__()
        self.result = result


def read_in_thread(dataset: Dataset[Any], first: int, stop: int) -> Result:
    """`read_timed`, for a thread's task: a failed read is raised (see `BlockReadError`)."""
    result = read_timed(dataset, first, stop)
    if result[1] is None:
        return result
    try:
        raise BlockReadError(result)
    finally:  # held by this frame, the result's error would hold it back
        del result


class ThreadTask:
    """A block read in a thread (`read_in_thread`): its result, or that of the read that failed."""

    def __init__(self, future: concurrent.futures.Future[Result]) -> None:
        self.future = future

    def result(self) -> Result:
        try:
            return self.future.result()
        except BlockReadError as failed:
            return failed.result
        finally:  # the future holds what it raised, whose traceback holds this frame
            del self

    def cancel(self) -> bool:
        return self.future.cancel()


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
    started = time.perf_counter()  # no local holds the error: its traceback holds this frame
    return (*read_block(dataset, first, stop), time.perf_counter() - started)


def _shutdown(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)
