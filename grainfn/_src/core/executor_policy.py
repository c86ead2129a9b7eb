"""Where a reader's blocks are read: in the consumer's thread or on an executor, by measured costs.

A `BlockReader` (`core/blocks.py`) reads blocks of positions in the
consumer's own thread or hands them to an executor (threads, worker
processes, Ray actors). The `ExecutorPolicy` decides which, from the costs
the reader measures and gives it: what reading an element costs here, how
long the consumer waits per element for the executor's blocks, what the
executor's tasks say they cost, and the time on a `Clock`. It reads no time
of its own but its clock, so a test hands it a clock it moves and asserts
the `Decision`s, never wall time. Its constants are a `Tuning`.

An executor must earn its place: it never makes a pipeline slower than
reading in the consumer's own thread. While it starts (worker processes load
the pipeline, actors get it from the object store: an executor with a
`ready` method says when it is done), the reader reads in its own thread, so
the first elements come as soon as without it; and it is only started once
reading here has taken `start_after` seconds, unless an element costs
`start_at_once` seconds or more here (work that processes pay for from the
first seconds) or `start_prefetch` asks. Starting processes and a trial
that loses cost a few tens of milliseconds (and on two cores, a trial of
work as cheap as a copy of each element loses 15%): a run too short to pay
for them starts none, and a longer one loses a few percent at most. An
executor that says what readying it costs (`start_seconds`: copying a big
in-memory source for its workers, say) waits `start_costs` times that, so
that a start that loses costs at most a tenth of the reading before it.
Then it measures both sides and keeps the work where it is faster. Given a
`Meter` (the time the consumer spent inside the pipeline's `next`), each
side's cost per element below also counts what the stream stages above the
read cost with it:
- with the executor, how long the consumer waits per element for its blocks,
  over `trial_tasks` blocks (`trial_shrink` times smaller while on trial),
  not counting those that waited for it to start (the whole first round of
  an executor that cannot say when it is ready, the first block otherwise);
- in the consumer's thread, what reading an element costs there (the least
  over its last blocks): measured while the executor starts. An executor
  that reads from the start (one without `ready`, or a reader told not to
  read while it starts) is judged after a first trial that spans `max_task`
  positions at least, for which the reader reads `probe_blocks` blocks
  itself to measure it; either way it measures it so again later, less and
  less often.
The executor has the work where the consumer waits less with it (threads:
`thread_gain` times less, their `required_gain`); whichever side has the
work keeps it unless the other is `margin` times faster. Once the executor
loses, it is sent no more blocks (those in flight are taken; threads' are
dropped) and the reader reads in its own thread; if its first blocks there
cost more than the executor's wait did, the executor takes the work back at
once. The side not in use is tried again after `first_backoff` times as long
as the longest trial of either side took, then twice that, and so on (a side
that wins from the other starts the count again); the executor also as soon
as reading here costs more than its wait did. An executor that failed a block
(a worker that died, say) keeps the work for good: a position that kills a
process must not run in the consumer.

Threads only help when reading a position waits (on a file, a network, a
sleep) instead of computing: Python code holds the GIL, and then threads make
a pipeline slower, not faster. So a reader allowed threads starts in the
calling thread and measures each block: when the thread's CPU time is under
`waiting_share` of the wall time for `waiting_blocks` blocks in a row,
reading waits, and it hands the positions ahead to a pool of threads, on
trial as above (a shared machine can also make a thread wait: another
process took its core).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol


@dataclasses.dataclass(frozen=True)
class Tuning:
    """The constants of the executor policy (see the module); the defaults are measured ones.

    Examples:
        >>> Tuning().start_after, Tuning(start_after=0.01).start_after
        (1.0, 0.01)
    """

    waiting_share: float = 0.25
    """A read whose thread's CPU time is below this share of its wall time waited."""
    waiting_blocks: int = 3
    """Consecutive waiting blocks before threads start."""
    trial_tasks: int = 4
    """Tasks over which an executor must prove faster than reading here."""
    thread_gain: float = 1.5
    """How many times less threads must keep the consumer waiting (their `required_gain`)."""
    trial_shrink: int = 4
    """Tasks on trial are this many times shorter: a trial that loses costs less."""
    margin: float = 1.2
    """The side that has the work keeps it unless the other is this many times faster."""
    probe_blocks: int = 3
    """Blocks read here to measure reading here, before the work is settled."""
    first_backoff: float = 16.0
    """Times the longest trial before the side not in use is tried again (then doubled)."""
    min_block_seconds: float = 0.0005
    """Blocks faster than this say nothing about waiting."""
    max_task: int = 1024
    """The most positions in one block or task."""
    start_after: float = 1.0
    """Seconds of reading in the consumer's thread before an executor with `ready` is started."""
    start_at_once: float = 1e-4
    """Seconds per element read here from which such an executor is started at once."""
    start_costs: float = 10.0
    """Times its `start_seconds` that an executor on trial waits, read here, before it starts."""


DEFAULT_TUNING = Tuning()


class Clock(Protocol):
    """The time a reader measures costs by: seconds on a monotonic clock, and its thread's CPU."""

    def now(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    def cpu(self) -> float:
        """Seconds of CPU the calling thread has used."""
        ...


class SystemClock:
    """The machine's clocks: `time.perf_counter` and `time.thread_time`.

    The builtins themselves, not methods that call them: a pipeline's `next`
    is timed with them per element (`Meter`), so a reading costs no frame.
    """

    now = staticmethod(time.perf_counter)
    cpu = staticmethod(time.thread_time)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class Decision(enum.Enum):
    """What the policy decides after an event: where the work goes next."""

    KEEP = "keep"
    """The work stays where it is."""
    HAND_OVER = "hand over"
    """The executor takes the work (is started, or wins a probe): tasks sized by reading here."""
    RETRY = "retry"
    """The executor is tried again, its tasks sized as when it last read."""
    TAKE_BACK = "take back"
    """The executor lost: the consumer takes the work back, and measures reading here."""
    FALL_BACK = "fall back"
    """Reading here was measured faster: the work stays in the consumer (see `Fallback`)."""


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


def reading_waits(cpu: float, wall: float, tuning: Tuning = DEFAULT_TUNING) -> bool:
    """Whether a read of `wall` seconds that took `cpu` seconds of its thread's CPU waited.

    A read that waits (on a file, a network) is what threads speed up; one
    too short to judge says nothing.

    Examples:
        >>> reading_waits(cpu=0.0001, wall=0.001), reading_waits(cpu=0.0009, wall=0.001)
        (True, False)
    """
    return wall > tuning.min_block_seconds and cpu < tuning.waiting_share * wall


def keeps_up(waited_per_element: float, own_cost: float, gain: float = 1.0) -> bool:
    """Whether an executor earns its place: the consumer waits `gain` times less for its blocks.

    Per element, against `own_cost`, the seconds reading in the consumer's own
    thread costs (0 if unknown: the executor is kept until it is known).

    Examples:
        >>> keeps_up(0.0019, 0.002), keeps_up(0.0021, 0.002), keeps_up(0.0015, 0.002, gain=1.5)
        (True, False, False)
    """
    return own_cost <= 0 or waited_per_element * gain <= own_cost


def threads_keep_up(
    waited_per_element: float, own_cost: float, tuning: Tuning = DEFAULT_TUNING
) -> bool:
    """Whether threads earn their place: the consumer waits `thread_gain` times less with them.

    Examples:
        >>> threads_keep_up(0.001, 0.002), threads_keep_up(0.0015, 0.002)
        (True, False)
    """
    return keeps_up(waited_per_element, own_cost, tuning.thread_gain)


class _Trial:
    """What the executor's counted blocks cost, since its trial began."""

    __slots__ = ("elements", "seconds", "tasks", "waited")

    def __init__(self) -> None:
        self.waited = 0.0  # the consumer's wait for them
        self.elements = 0
        self.tasks = 0
        self.seconds = 0.0  # the executor's own seconds, as its tasks reported them


class ExecutorPolicy:
    """Decides where a reader's blocks are read, from the costs it is given (see the module).

    The reader tells it what happened (a block read here, a block from the
    executor, the executor started or failed, the work taken back) with the
    costs it measured, and each event that may move the work returns a
    `Decision`. Its only time is `clock`'s.

    Args:
        tuning: The constants.
        clock: The time of its trials and backoffs.
        adaptive: Whether the executor is on trial: False leaves every block to it.
        read_while_starting: Whether the consumer reads while the executor
            starts; None: as `adaptive`.
    """

    def __init__(
        self,
        tuning: Tuning = DEFAULT_TUNING,
        clock: Clock = SYSTEM_CLOCK,
        adaptive: bool = True,
        read_while_starting: bool | None = None,
    ) -> None:
        self.tuning = tuning
        self.clock = clock
        self.adaptive = adaptive
        self.read_while_starting = adaptive if read_while_starting is None else read_while_starting
        self.here_seconds = 0.0  # spent reading in the consumer's thread (see `start_after`)
        self.start_asked = False  # `start_prefetch` asked for the executor now
        self.waiting_blocks = 0  # consecutive blocks read here that waited
        self.own_costs: collections.deque[float] = collections.deque(maxlen=8)
        # The executor's trial.
        self.gain = 1.0  # how many times less the consumer must wait with the executor
        self.uncounted = 0  # blocks still to come before the trial counts (start-up, refill)
        self.trial = _Trial()
        self.counted_from = 0.0  # when the executor's first counted block came since it started
        self.trial_seconds = 0.0  # the longest trial of either side: the unit of the time
        # before the side not in use is tried again
        self.judged = False  # whether the executor was judged since it last started
        self._won_probe = False  # the executor starts having won a probe: judged already
        self.last_wait: float | None = None  # the consumer's wait per element in the last trial
        self.last_executor = 0.0  # the executor's own seconds per element in the last trial
        # Reading here, measured.
        self.probe = 0  # blocks still to read here before the executor's trial is settled
        self.probe_started = 0.0
        # When the side not in use is tried again (times of `clock`).
        self.retry_at = 0.0  # the executor, while the work is here
        self.probe_at = 0.0  # reading here, while a given executor has the work
        self.backoff = tuning.first_backoff
        self.ahead_won: bool | None = None  # the last decision: executor (True) or here
        self.fallbacks = 0  # how many times the work came back to the consumer
        # What the stages above cost per element, by side (executor: True), with a meter.
        self.above: dict[bool, collections.deque[float]] = {
            side: collections.deque(maxlen=8) for side in (True, False)
        }

    @property
    def own_cost(self) -> float:
        """Seconds per element reading in the calling thread: the least of the last blocks.

        The least, because small blocks carry a fixed cost and a shared machine
        can stall any block; 0 when nothing was read in the calling thread yet.
        """
        return min(self.own_costs, default=0.0)

    def above_cost(self, ahead: bool) -> float:
        """Seconds per element the stages above cost with the executor (or here).

        The least of the last blocks; the other side's where this one is not
        measured yet (0 without a meter).
        """
        return min(self.above[ahead] or self.above[not ahead], default=0.0)

    def note_above(self, ahead: bool, seconds_per_element: float) -> None:
        """Notes what the stages above cost per element of a block read ahead (or here)."""
        if seconds_per_element >= 0:
            self.above[ahead].append(seconds_per_element)

    # -- Starting -------------------------------------------------------------------------

    def ask_to_start(self) -> None:
        """`start_prefetch` wants the executor now: it is asked at once."""
        self.start_asked = True

    def starting(self, start_seconds: Callable[[], float] | None = None) -> Decision:
        """Whether an executor with `ready` may be asked (which starts it): HAND_OVER or KEEP.

        An executor on trial (`adaptive`) is not asked before reading here
        has taken `start_after` seconds (or `start_costs` times its
        `start_seconds`), unless an element costs `start_at_once` here (the
        least over two blocks at least: the first may pay for warming up) or
        `start_prefetch` asked for it; one the user pinned is asked at once.
        """
        if (
            self.adaptive
            and not self.start_asked
            and self.here_seconds < self.start_after(start_seconds)
        ):
            costly = len(self.own_costs) >= 2 and self.own_cost >= self.tuning.start_at_once
            if not costly:
                return Decision.KEEP
        return Decision.HAND_OVER

    def start_after(self, start_seconds: Callable[[], float] | None = None) -> float:
        """Seconds to read here before an executor on trial starts (see the module)."""
        tuning = self.tuning
        if self.here_seconds < tuning.start_after or start_seconds is None:
            return tuning.start_after
        return max(tuning.start_after, tuning.start_costs * start_seconds())

    def executor_starts(self, gain: float, uncounted: int) -> None:
        """The executor starts reading ahead; its first `uncounted` blocks are not judged."""
        self.judged, self._won_probe = self._won_probe, False
        self.gain = gain
        self.uncounted = uncounted
        self.probe = 0
        self.trial = _Trial()

    def task_size(
        self, task_seconds: float, seconds_per_element: float, starting: bool = False
    ) -> int:
        """Positions per task: `task_seconds` of work, `trial_shrink` times less on trial.

        A task given as the executor starts is a trial's, if it is on trial at all.
        """
        tuning = self.tuning
        on_trial = self.adaptive and (starting or not self.judged)
        seconds = task_seconds / (tuning.trial_shrink if on_trial else 1)
        if seconds_per_element <= 0:
            return tuning.max_task
        return int(min(tuning.max_task, max(1, seconds // seconds_per_element)))

    # -- Blocks ---------------------------------------------------------------------------

    def spent_here(self, seconds: float) -> None:
        """A block was read in the consumer's thread in `seconds`, whether or not it failed."""
        self.here_seconds += seconds

    def own_block(
        self,
        seconds_per_element: float,
        waited: bool,
        *,
        executor: bool,
        starting: bool,
        threads: bool,
    ) -> Decision:
        """A block read here cost `seconds_per_element`; whether the executor takes the work.

        Args:
            seconds_per_element: What reading an element here cost.
            waited: Whether the read waited (`reading_waits`).
            executor: Whether the reader has an executor (not threads it may make).
            starting: Whether that executor has not read ahead yet (it is starting).
            threads: Whether the reader may make threads.

        Returns:
            HAND_OVER (threads start, or the executor won a probe), RETRY (the
            executor is tried again), FALL_BACK (a probe confirmed reading
            here) or KEEP.
        """
        self.own_costs.append(seconds_per_element)
        if executor and starting:
            return Decision.KEEP  # the reader starts it once it is ready
        if self.probe:
            self.probe -= 1
            return Decision.KEEP if self.probe else self._settle()
        if not executor:  # threads, only once reads are seen to wait
            self.waiting_blocks = self.waiting_blocks + 1 if waited else 0
            due = threads and self.waiting_blocks >= self.tuning.waiting_blocks
            if due and self.clock.now() >= self.retry_at:
                return Decision.HAND_OVER
            return Decision.KEEP
        if self.clock.now() >= self.retry_at or (
            self.last_wait is not None and self.executor_faster()
        ):
            return Decision.RETRY
        return Decision.KEEP

    def executor_block(
        self, waited: float, elements: int, seconds: float, *, own_threads: bool
    ) -> Decision:
        """A block of the executor's came: counted in its trial; TAKE_BACK where it lost.

        Args:
            waited: How long the consumer waited for it.
            elements: Its elements.
            seconds: What reading it cost the executor, as its task says.
            own_threads: Whether the executor is the reader's own threads
                (judged against reading here as measured before they started,
                never probed).
        """
        if not self.adaptive:
            return Decision.KEEP
        if self.uncounted:
            self.uncounted -= 1
            self.counted_from = self.clock.now()
            return Decision.KEEP
        trial = self.trial
        trial.waited += waited
        trial.elements += elements
        trial.tasks += 1
        trial.seconds += seconds
        measured = bool(self.own_costs)  # whether reading here was ever measured
        if trial.tasks < self.tuning.trial_tasks or (
            not measured and trial.elements < self.tuning.max_task
        ):
            return Decision.KEEP
        now = self.clock.now()
        self.last_wait = trial.waited / trial.elements
        self.last_executor = trial.seconds / trial.elements
        self.trial = _Trial()  # judge again over the next tasks
        if not self.judged:  # the first judgement since the executor started: a trial
            self.trial_seconds = max(self.trial_seconds, now - self.counted_from)
        if not measured:  # processes, actors: measure it now (threads measured it first)
            return Decision.KEEP if own_threads else Decision.TAKE_BACK
        if not self.executor_faster():
            return Decision.TAKE_BACK
        if not self.judged:  # a retry won
            self.judged = True
            self._decided(ahead=True)
            return Decision.KEEP
        # What reading here costs may have changed since it was measured: measure it again.
        return Decision.TAKE_BACK if not own_threads and now >= self.probe_at else Decision.KEEP

    def executor_failed(self, for_good: bool) -> None:
        """The executor failed a block (or the wait for it did): its trial starts again.

        `for_good` (a block that failed on worker processes or actors) pins
        the work there: a position that kills a worker process may kill this one.
        """
        if for_good:
            self.adaptive = False
        self.uncounted = 1  # the next block is sent when the consumer waits for it
        self.trial = _Trial()

    def takes_back(self) -> None:
        """The consumer takes the work back: reading here is measured afresh over a probe."""
        self.waiting_blocks = 0
        self.own_costs.clear()  # a fresh measure, with the executor idle
        self.probe = self.tuning.probe_blocks
        self.probe_started = self.clock.now()

    def executor_faster(self) -> bool:
        """Whether the consumer waited less per element with the executor than reading here costs.

        By its `gain`, and a margin: the side that has the work keeps it
        unless the other is `margin` times faster.
        """
        assert self.last_wait is not None
        margin = {True: self.tuning.margin, False: 1 / self.tuning.margin, None: 1.0}
        here = self.own_cost + self.above_cost(False) if self.own_cost > 0 else 0.0
        wait = self.last_wait + self.above_cost(True)
        return keeps_up(wait, here, self.gain / margin[self.ahead_won])

    def fallback(self, position: int) -> Fallback:
        """The figures of the last FALL_BACK, the consumer reading from `position`."""
        assert self.last_wait is not None
        retry_after = self.retry_at - self.clock.now()
        figures = (self.last_wait, self.own_cost, self.last_executor, retry_after)
        return Fallback(position, *figures, self.fallbacks)

    def _settle(self) -> Decision:
        """After the probe: back to the executor if it was faster, else the work stays here."""
        self.trial_seconds = max(self.trial_seconds, self.clock.now() - self.probe_started)
        if self.executor_faster():
            self._decided(ahead=True)
            self._won_probe = True  # decided already: it starts judged
            return Decision.HAND_OVER
        self._decided(ahead=False)
        self.fallbacks += 1
        return Decision.FALL_BACK

    def _decided(self, ahead: bool) -> None:
        """Notes who has the work, the executor (`ahead`) or this thread; when the other is tried.

        After `first_backoff` times as long as the longest trial of either side
        took; twice as long each time the same side wins again.
        """
        self.backoff = self.backoff * 2 if ahead is self.ahead_won else self.tuning.first_backoff
        self.ahead_won = ahead
        now = self.clock.now()
        if ahead:
            self.probe_at = now + self.backoff * self.trial_seconds
        else:
            self.retry_at = now + self.backoff * self.trial_seconds
