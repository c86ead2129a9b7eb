"""Reading a dataset's positions in order, block by block, in the calling thread or ahead of it.

A `BlockReader` hands out consecutive blocks of positions. It reads them in
the calling thread, or hands them ahead of time to an executor: a thread pool
(`ReadOptions`), worker processes (`mp_prefetch`) or Ray actors
(`ray_prefetch`). Either way blocks come back in position order, so the
output and the state never depend on how they were read, only the speed does.

An executor must earn its place: it never makes a pipeline slower than
reading in the consumer's own thread. While it starts (worker processes load
the pipeline, actors get it from the object store: an executor with a
`ready` method says when it is done), the reader reads in its own thread, so
the first elements come as soon as without it; and it is only started once
reading here has taken `START_AFTER` seconds, unless an element costs
`START_AT_ONCE` seconds or more here (work that processes pay for from the
first seconds) or `start_prefetch` asks. Starting processes and a trial
that loses cost a few tens of milliseconds (and on two cores, a trial of
work as cheap as a copy of each element loses 15%): a run too short to pay
for them starts none, and a longer one loses a few percent at most. An
executor that says what readying it costs (`start_seconds`: copying a big
in-memory source for its workers, say) waits `START_COSTS` times that, so
that a start that loses costs at most a tenth of the reading before it.
Then it measures both sides and keeps the work where it is faster. Given a
`Meter` (the time the consumer spent inside the pipeline's `next`), each
side's cost per element below also counts what the stream stages above the
read cost with it:
- with the executor, how long the consumer waits per element for its blocks,
  over `_TRIAL_TASKS` blocks (a quarter of the usual size while on trial),
  not counting those that waited for it to start (the whole first round of
  an executor that cannot say when it is ready, the first block otherwise);
- in the consumer's thread, what reading an element costs there (the least
  over its last blocks): measured while the executor starts. An executor
  that reads from the start (one without `ready`, or a reader told not to
  read while it starts) is judged after a first trial that spans `MAX_TASK`
  positions at least, for which the reader reads `_PROBE_BLOCKS` blocks
  itself to measure it; either way it measures it so again later, less and
  less often.
The executor has the work where the consumer waits less with it (threads:
1.5 times less, their `required_gain`); whichever side has the work keeps it
unless the other is `_MARGIN` times faster. Once the executor loses, it is
sent no more blocks (those in flight are taken; threads' are dropped) and the
reader reads in its own thread; if its first blocks there cost more than the
executor's wait did, the executor takes the work back at once. The side not
in use is tried again after 16 times as long as the longest trial of either
side took, then 32 times, and so on (a side that wins from the other starts
the count again); the executor also as soon as reading here costs more than
its wait did. Worker processes and actors stay up, idle, while the consumer
reads (their owner closes them); an executor with a `note_fallback` method
is told each time the work is settled in the consumer (`Fallback`). An
executor that failed a block (a worker that died, say) keeps the work for
good: a position that kills a process must not run in the consumer.

Threads only help when reading a position waits (on a file, a network, a
sleep) instead of computing: Python code holds the GIL, and then threads make
a pipeline slower, not faster. So a reader allowed threads starts in the
calling thread and measures each block: when the thread's CPU time is under
a quarter of the wall time for three blocks in a row, reading waits, and it
hands the positions ahead to a pool of threads, on trial as above (a shared
machine can also make a thread wait: another process took its core).
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

_WAITING_SHARE = 0.25  # CPU time below this share of wall time means reading waits
WAITING_BLOCKS = 3  # consecutive waiting blocks before threads start
_TRIAL_TASKS = 4  # tasks over which an executor must prove faster than this thread
_REQUIRED_GAIN = 1.5  # how much less threads must keep the consumer waiting
_TRIAL_SHRINK = 4  # tasks on trial are this many times shorter: a trial that loses costs less
_MARGIN = 1.2  # the side that has the work keeps it unless the other is this much faster
_PROBE_BLOCKS = 3  # blocks read here to measure reading here, before the work is settled
_FIRST_BACKOFF = 16.0  # times the longest trial before the other side is tried again (doubled)
_MIN_BLOCK_SECONDS = 0.0005  # blocks faster than this say nothing about waiting
MAX_TASK = 1024
START_AFTER = 1.0
"""Seconds of reading in the consumer's thread before an executor with `ready` is started."""
START_AT_ONCE = 1e-4
"""Seconds per element read here from which such an executor is started at once."""
START_COSTS = 10.0
"""Times its `start_seconds` that an executor on trial waits, read here, before it starts."""

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
    """Reads blocks of positions ahead of the consumer.

    Four attributes are optional, read where present: `keeps_blocks` (see
    `ThreadExecutor`); `required_gain`, how
    many times less the consumer must wait per element than reading in its
    own thread costs for the executor to keep the work (1 when absent: it only
    has to be faster); `ready()`, which starts the executor if it has not
    started and says, without waiting, whether it can take blocks now (the
    reader reads in its own thread until it can); and `note_fallback(figures)`,
    called with a `Fallback` each time the reader takes the work back into the
    consumer's thread.
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


class Fallback(NamedTuple):
    """Why a reader took the work back from its executor: figures in seconds per element.

    Given to the executor's `note_fallback` (where it has one) once reading in
    the consumer's thread has been measured faster, so that an executor the
    user asked for explicitly (a Ray cluster) can say so.
    """

    position: int  # the first position the consumer read itself
    waited: float  # the consumer's wait for the executor's blocks, in its last trial
    own: float  # reading in the consumer's own thread
    executor: float  # reading on the executor, as its tasks reported it (transfer excluded)
    retry_after: float  # seconds before the executor is tried again
    fallbacks: int  # how many times this reader took the work back, this time included


class Meter:
    """Seconds the consumer has spent inside a pipeline's `next`, all told: its cost of the data.

    Given to a `BlockReader` (by `mp_prefetch` and `ray_prefetch`, which time
    their cursor's `next`), it judges each side by what an element costs the
    consumer in the end: the read or the wait, and the stream stages above it
    (a batch stacks the contiguous rows workers send faster than the views
    that reading here gives), never the consumer's own code.
    """

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


def reading_waits(cpu: float, wall: float) -> bool:
    """Whether a read of `wall` seconds that took `cpu` seconds of its thread's CPU waited.

    A read that waits (on a file, a network) is what threads speed up; one
    too short to judge says nothing.
    """
    return wall > _MIN_BLOCK_SECONDS and cpu < _WAITING_SHARE * wall


def keeps_up(waited_per_element: float, own_cost: float, gain: float = 1.0) -> bool:
    """Whether an executor earns its place: the consumer waits `gain` times less for its blocks.

    Per element, against `own_cost`, the seconds reading in the consumer's own
    thread costs (0 if unknown: the executor is kept until it is known).

    Examples:
        >>> keeps_up(0.0019, 0.002), keeps_up(0.0021, 0.002), keeps_up(0.0015, 0.002, gain=1.5)
        (True, False, False)
    """
    return own_cost <= 0 or waited_per_element * gain <= own_cost


def threads_keep_up(waited_per_element: float, own_cost: float) -> bool:
    """Whether threads earn their place: the consumer waits 1.5 times less for their reads.

    Examples:
        >>> threads_keep_up(0.001, 0.002), threads_keep_up(0.0015, 0.002)
        (True, False)
    """
    return keeps_up(waited_per_element, own_cost, _REQUIRED_GAIN)


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
        executor: Reads ahead from the start (worker processes, Ray actors),
            instead of threads; the reader never closes it for good before its
            own `close`.
        adaptive: Whether the executor is on trial (see the module): False
            leaves every block to it.
        read_while_starting: Whether the reader reads in its own thread
            while the executor starts (see the module); None: as `adaptive`.
        clock: Seconds on a monotonic clock; a test may pass its own.
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
        buffer: int = 500,
        executor: Executor | None = None,
        adaptive: bool = True,
        read_while_starting: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
        meter: Meter | None = None,
        thread_pool: Callable[[], Executor] | None = None,
    ) -> None:
        self.dataset = dataset
        self.length = dataset.length
        self.position = position  # the first position not yet read or handed to the executor
        self.threads = threads
        self.buffer = max(1, buffer)
        self.clock = clock
        self.sizer = BlockSizer(clock=clock)
        self.waiting_blocks = 0
        self.error: Exception | None = None  # raised by the next read
        self.ready: tuple[int, list[Any]] | None = None  # a block read, not handed out yet
        self.executor = executor
        self.thread_pool = thread_pool
        self.owned = False  # whether the reader made its executor (threads): closed when idle
        self.adaptive = adaptive
        self.read_while_starting = adaptive if read_while_starting is None else read_while_starting
        self.started = False  # whether the executor ever read ahead
        self.read_here = 0  # elements read in the consumer's thread, and by the executor
        self.read_ahead = 0
        self.here_seconds = 0.0  # spent reading in the consumer's thread (see START_AFTER)
        self.start_asked = False  # `start_prefetch` asked for the executor now
        self.reads_ahead = False  # whether threads, processes or actors read ahead now
        self.draining = False  # the executor lost: its blocks in flight are taken, no more sent
        self.pending: collections.deque[tuple[int, int, Task]] = collections.deque()
        self.task_size = 1
        self.own_costs: collections.deque[float] = collections.deque(maxlen=8)
        # The executor's trial (see the module).
        self.gain = 1.0  # how many times less the consumer must wait with the executor
        self.uncounted = 0  # blocks still to come before the trial counts (start-up, refill)
        self.trial = [0.0, 0, 0, 0.0]  # counted: seconds waited, elements, tasks, executor seconds
        self.counted_from = 0.0  # when the executor's first counted block came since it started
        self.trial_seconds = 0.0  # the longest trial of either side: the unit of the time
        # before the side not in use is tried again
        self.judged = False  # whether the executor was judged since it last started
        self.last_wait: float | None = None  # the consumer's wait per element in the last trial
        self.last_executor = 0.0  # the executor's own seconds per element in the last trial
        # Reading here, measured (see the module).
        self.probe = 0  # blocks still to read here before the executor's trial is settled
        self.probe_started = 0.0
        self.here_from = position  # where the consumer last took the work back
        # When the side not in use is tried again (times of `clock`).
        self.retry_at = 0.0  # the executor, while the work is here
        self.probe_at = 0.0  # reading here, while a given executor has the work
        self.backoff = _FIRST_BACKOFF
        self.ahead_won: bool | None = None  # the last decision: executor (True) or here
        self.fallbacks = 0  # how many times the work came back to the consumer
        # What the stages above cost per element, by side (executor: True), with a meter.
        self.meter = meter
        self.above: dict[bool, collections.deque[float]] = {
            side: collections.deque(maxlen=8) for side in (True, False)
        }
        self.handed: tuple[bool, float, int, float] | None = None  # the last block (`_note`)
        self.block_seconds = (False, 0.0)  # how the block now read came, and its seconds

    @property
    def ahead(self) -> int:
        """Positions handed to the executor and not yet returned."""
        return sum(stop - first for first, stop, _ in self.pending)

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
        above = (now - then - seconds) / elements
        if above >= 0:
            self.above[ahead].append(above)

    def _above(self, ahead: bool) -> float:
        """Seconds per element the stages above cost with the executor (or here).

        The least of the last blocks; the other side's where this one is not
        measured yet (0 without a meter).
        """
        return min(self.above[ahead] or self.above[not ahead], default=0.0)

    def _read(self, at_least: int) -> tuple[int, list[Any]]:
        if self.ready is not None:
            taken, self.ready = self.ready, None
            return taken
        if self.error is not None:
            raise self._take_error()
        if self.executor is not None and not self.started and self._executor_ready():
            # Processes or actors read from the start, or from when they are ready.
            self.start(seconds_per_element=self.own_cost or None)
        if self.reads_ahead:
            return self._collect()
        first = self.position
        if first >= self.length:
            raise StopIteration
        stop = min(self.length, first + self.sizer.start(at_least))
        cpu = time.thread_time()
        block, self.error = read_block(self.dataset, first, stop)
        cpu = time.thread_time() - cpu
        wall = self.sizer.done()
        self.position = first + len(block)
        self.read_here += len(block)
        self.here_seconds += wall
        if self.error is not None:
            return self._fail(first, block)
        self.own_costs.append(wall / (stop - first))
        self.block_seconds = (False, wall)
        self._after_own_block(reading_waits(cpu, wall))
        return first, block

    def start_prefetch(self) -> None:
        """Starts reading ahead before the first read; an executor still starting only starts."""
        self.start_asked = True
        if self.executor is not None and not self.started and not self._executor_ready():
            return  # `read` hands it the work once it is ready
        self.start(seconds_per_element=self.own_cost or None)

    def start(self, seconds_per_element: float | None = None) -> None:
        """Starts reading ahead now (if this reader may use threads or processes at all)."""
        if self.reads_ahead or not (self.threads or self.executor):
            return
        if self.executor is None:
            pool = self.thread_pool
            self.executor = (
                ThreadExecutor(self.dataset, self.threads, self.buffer) if pool is None else pool()
            )
            self.owned = True
        self.judged = False
        if seconds_per_element is not None:
            self.task_size = self._task_size(seconds_per_element)
        self.gain = getattr(self.executor, "required_gain", 1.0)
        # Starting processes or actors takes seconds: unless the executor said it was
        # ready, the whole first round waited for it.
        waited_ready = self.read_while_starting and hasattr(self.executor, "ready")
        first_round = self.started or self.owned or waited_ready
        self.uncounted = 1 if first_round else self.executor.max_tasks
        self.started = self.reads_ahead = True
        self.probe = 0
        self.trial = [0.0, 0, 0, 0.0]
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
            self.ahead < self.buffer
            and len(self.pending) < executor.max_tasks
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
        started = self.clock()
        try:  # no local holds the task: what it raised holds this frame
            block, self.error, seconds = self.pending[0][2].result()
        except BaseException as failure:  # the executor failed (Ctrl-C while waiting, say)
            self._after_failure(first, isinstance(failure, Exception))  # the block is read again
            raise
        self.pending.popleft()
        failed = self.error is not None
        try:
            return self._taken(first, stop, block, failed, seconds, self.clock() - started)
        except BaseException:  # Ctrl-C before the block was handed out: the next read has it
            if not failed:
                self.ready = (first, block)
            raise

    def _taken(
        self, first: int, stop: int, block: list[Any], failed: bool, seconds: float, waited: float
    ) -> tuple[int, list[Any]]:
        """Hands out a block the executor read, judging it, and keeps the executor busy."""
        self.read_ahead += len(block)
        self.block_seconds = (True, waited)
        if failed:
            self._after_failure(first + len(block), True)
            return self._fail(first, block)
        self.task_size = self._task_size(seconds / len(block))
        if self.draining:
            if not self.pending:
                self._read_here()
        elif self.adaptive and self._executor_loses(waited, len(block), seconds):
            if self.owned and not getattr(self.executor, "keeps_blocks", False):
                # Threads: what they have not started is dropped, and read here.
                self._drop_pending()
                self.position = first + len(block)
                self._read_here()
            else:  # processes, actors, named threads: what they read is taken (see
                # `ThreadExecutor.keeps_blocks`), and they are left idle
                self.draining = True
                if not self.pending:
                    self._read_here()
        else:
            self._submit()  # keep the executor busy while the consumer works on this block
        return first, block

    def _task_size(self, seconds_per_element: float) -> int:
        """Positions per task: the executor's `task_seconds` of work, a quarter on trial."""
        assert self.executor is not None
        on_trial = self.adaptive and not self.judged
        seconds = self.executor.task_seconds / (_TRIAL_SHRINK if on_trial else 1)
        if seconds_per_element <= 0:
            return MAX_TASK
        return int(min(MAX_TASK, max(1, seconds // seconds_per_element)))

    def _after_failure(self, position: int, failed: bool) -> None:
        """Drops the blocks in flight; the next read starts at `position`, with the executor.

        A block that failed on worker processes or actors keeps the work there:
        a position that kills a worker process may kill this one.
        """
        self._drop_pending()
        self.position = position
        self.draining = False
        if failed and not self.owned:
            self.adaptive = False
        self.uncounted = 1  # the next block is sent when the consumer waits for it
        self.trial = [0.0, 0, 0, 0.0]

    def _executor_loses(self, waited: float, elements: int, seconds: float) -> bool:
        """Counts a block of the executor's trial; whether the trial ends and the executor lost."""
        if self.uncounted:
            self.uncounted -= 1
            self.counted_from = self.clock()
            return False
        trial = self.trial
        trial[0] += waited
        trial[1] += elements
        trial[2] += 1
        trial[3] += seconds
        measured = bool(self.own_costs)  # whether reading here was ever measured
        if trial[2] < _TRIAL_TASKS or (not measured and trial[1] < MAX_TASK):
            return False
        now = self.clock()
        self.last_wait, self.last_executor = trial[0] / trial[1], trial[3] / trial[1]
        self.trial = [0.0, 0, 0, 0.0]  # judge again over the next tasks
        if not self.judged:  # the first judgement since the executor started: a trial
            self.trial_seconds = max(self.trial_seconds, now - self.counted_from)
        if not measured:  # processes, actors: measure it now (threads measured it first)
            return not self.owned
        if not self._executor_faster():
            return True
        if not self.judged:  # a retry won
            self.judged = True
            self._decided(ahead=True)
            return False
        # What reading here costs may have changed since it was measured: measure it again.
        return not self.owned and now >= self.probe_at

    def _executor_faster(self) -> bool:
        """Whether the consumer waited less per element with the executor than reading here costs.

        By its `gain`, and a margin: the side that has the work keeps it
        unless the other is `_MARGIN` times faster.
        """
        assert self.last_wait is not None
        margin = {True: _MARGIN, False: 1 / _MARGIN, None: 1.0}[self.ahead_won]
        here = self.own_cost + self._above(False) if self.own_cost > 0 else 0.0
        return keeps_up(self.last_wait + self._above(True), here, self.gain / margin)

    def _read_here(self) -> None:
        """Takes the work back into this thread, from `self.position` on, and measures it."""
        if self.owned:
            assert self.executor is not None
            self.executor.close()
            self.executor = None
        self.reads_ahead = self.draining = False
        self.waiting_blocks = 0
        self.here_from = self.position
        self.own_costs.clear()  # a fresh measure, with the executor idle
        self.probe = _PROBE_BLOCKS
        self.probe_started = self.clock()
        # Blocks a quarter of the executor's: cheap enough to measure often, big enough
        # that a block's fixed cost does not count.
        self.sizer.size = max(1, min(self.sizer.limit, self.task_size // 4))

    def _executor_ready(self) -> bool:
        """Whether to start the executor now: it is ready, or the reader may not read here.

        An executor on trial (`adaptive`) is not asked (which starts it)
        before reading here has taken `START_AFTER` seconds (or `START_COSTS`
        times its `start_seconds`), unless an element costs `START_AT_ONCE`
        here (the least over two blocks at least: the first may pay for
        warming up) or `start_prefetch` asked for it; one the user pinned is
        asked at once.
        """
        ready = getattr(self.executor, "ready", None)
        if ready is None or not self.read_while_starting:
            return True
        if self.adaptive and not self.start_asked and self.here_seconds < self._start_after():
            costly = len(self.own_costs) >= 2 and self.own_cost >= START_AT_ONCE
            if not costly:
                return False
        return bool(ready())

    def _start_after(self) -> float:
        """Seconds to read here before an executor on trial starts (see the module)."""
        if self.here_seconds < START_AFTER:
            return START_AFTER
        cost = getattr(self.executor, "start_seconds", None)
        return START_AFTER if cost is None else max(START_AFTER, START_COSTS * cost())

    def _after_own_block(self, waited: bool) -> None:
        """Hands the work back to the executor where it is due (see the module)."""
        if self.executor is not None and not self.started:
            return  # it is starting: the next read starts it once it is ready
        if self.probe:
            self.probe -= 1
            if not self.probe:
                self._settle()
            return
        if self.executor is None:  # threads, only once reads are seen to wait
            self.waiting_blocks = self.waiting_blocks + 1 if waited else 0
            due = self.threads and self.waiting_blocks >= WAITING_BLOCKS
            if due and self.clock() >= self.retry_at:
                self.start(seconds_per_element=self.own_cost)
            return
        if self.clock() >= self.retry_at or (
            self.last_wait is not None and self._executor_faster()
        ):
            self.start()

    def _settle(self) -> None:
        """After the probe: back to the executor if it was faster, else the work stays here."""
        assert self.last_wait is not None
        self.trial_seconds = max(self.trial_seconds, self.clock() - self.probe_started)
        if self._executor_faster():
            self._decided(ahead=True)
            self.start(seconds_per_element=self.own_cost)
            self.judged = True  # decided already
            return
        self._decided(ahead=False)
        self.fallbacks += 1
        note = getattr(self.executor, "note_fallback", None)
        if note is not None:
            retry_after = self.retry_at - self.clock()
            figures = (self.last_wait, self.own_cost, self.last_executor, retry_after)
            note(Fallback(self.here_from, *figures, self.fallbacks))

    def _decided(self, ahead: bool) -> None:
        """Notes who has the work, the executor (`ahead`) or this thread; when the other is tried.

        After 16 times as long as the longest trial of either side took; twice
        as long each time the same side wins again.
        """
        self.backoff = self.backoff * 2 if ahead is self.ahead_won else _FIRST_BACKOFF
        self.ahead_won = ahead
        now = self.clock()
        if ahead:
            self.probe_at = now + self.backoff * self.trial_seconds
        else:
            self.retry_at = now + self.backoff * self.trial_seconds

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


class ThreadExecutor:
    """Reads blocks in a pool of threads; stops them when closed or garbage collected."""

    task_seconds = 0.002
    required_gain = _REQUIRED_GAIN
    keeps_blocks = False
    """Whether a reader that takes the work back takes the blocks sent too, read or not: a
    reader's thread pool may say so (`BlockReader`'s `thread_pool`) where no position may be
    read twice; these threads' blocks not started are dropped, and read by the consumer."""

    def __init__(self, dataset: Dataset[Any], threads: int, buffer: int) -> None:
        self.dataset = dataset
        self.max_tasks = buffer
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
