"""An executor earns its place: work too cheap for it is read in the consumer, with the same output.

The policy (`ExecutorPolicy`) is given costs and asserted decisions; the
reader that asks it runs on a clock the test moves (`ScriptedExecutor`, or
`support.scripted_clock` around real worker processes and threads): where
every block was read is then exact, the same on any machine however busy,
and recorded in each element (the process id, or the thread).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.blocks import BlockReader, Meter, Result, ThreadExecutor
from grainfn._src.core.executor_policy import (
    DEFAULT_TUNING,
    Decision,
    ExecutorPolicy,
    Fallback,
    Tuning,
    reading_waits,
)
from grainfn._src.parallel.processes import LeafExecutor, WorkerPool

from faults.faulty import Fault
from support.gated import gated_load
from support.leaks import assert_nothing_left
from support.reading import read_reader
from support.scripted_clock import CostedExecutor, ScriptedClock, charged
from support.waiting import wait_until

# ---------------------------------------------------------------------------
# The policy alone: costs given, decisions asserted.

KEEP, HAND_OVER, RETRY, TAKE_BACK, FALL_BACK = (
    Decision.KEEP,
    Decision.HAND_OVER,
    Decision.RETRY,
    Decision.TAKE_BACK,
    Decision.FALL_BACK,
)


def own_blocks(
    policy: ExecutorPolicy,
    clock: ScriptedClock,
    costs: list[float],
    elements: int = 100,
    waited: bool = False,
    executor: bool = True,
) -> list[Decision]:
    """The decisions after blocks of `elements` read here, each element costing `costs[k]`."""
    decisions = []
    for cost in costs:
        clock.advance(cost * elements)
        policy.spent_here(cost * elements)
        decisions.append(
            policy.own_block(cost, waited, executor=executor, starting=False, threads=True)
        )
    return decisions


def executor_blocks(
    policy: ExecutorPolicy,
    clock: ScriptedClock,
    costs: list[float],
    elements: int = 100,
    own_threads: bool = False,
) -> list[Decision]:
    """The decisions after blocks of `elements` from the executor, each costing `costs[k]`."""
    decisions = []
    for cost in costs:
        clock.advance(cost * elements, cpu=0.0)
        decisions.append(
            policy.executor_block(
                cost * elements, elements, cost * elements, own_threads=own_threads
            )
        )
    return decisions


def measured_here(cost: float) -> tuple[ExecutorPolicy, ScriptedClock]:
    """A policy whose executor just started, reading here measured at `cost` an element."""
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)
    for _ in range(2):
        policy.own_block(cost, False, executor=True, starting=True, threads=False)
    policy.executor_starts(gain=1.0, uncounted=1)
    return policy, clock


def test_an_executor_that_pays_keeps_the_work() -> None:
    policy, clock = measured_here(1e-3)
    # The first block is not counted (it waited for the start); the trial is 4 more.
    assert executor_blocks(policy, clock, [1e-4] * 5) == [KEEP] * 5
    assert policy.judged and policy.ahead_won is True and policy.last_wait == pytest.approx(1e-4)


def test_an_executor_slower_than_reading_here_loses_at_the_end_of_its_trial() -> None:
    policy, clock = measured_here(1e-5)
    assert executor_blocks(policy, clock, [1e-4] * 5) == [KEEP] * 4 + [TAKE_BACK]
    assert policy.trial_seconds == pytest.approx(4 * 100 * 1e-4)  # from the first counted block


def test_a_trial_lasts_trial_tasks_blocks_and_max_task_positions_when_here_is_unmeasured() -> None:
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)  # reading here never measured
    policy.executor_starts(gain=1.0, uncounted=1)
    # 100-element blocks: 4 tasks are not enough, 1024 positions are (the 11th counted block).
    decisions = executor_blocks(policy, clock, [1e-6] * 12)
    assert decisions == [KEEP] * 11 + [TAKE_BACK], "processes: reading here is measured now"
    threads = ExecutorPolicy(clock=clock)
    threads.executor_starts(gain=1.5, uncounted=1)
    assert executor_blocks(threads, clock, [1e-6] * 12, own_threads=True) == [KEEP] * 12


def test_a_trial_counts_four_tasks_by_default_and_as_tuned() -> None:
    for tasks in (4, 2):
        clock = ScriptedClock()
        policy = ExecutorPolicy(Tuning(trial_tasks=tasks), clock)
        policy.own_block(1e-5, False, executor=True, starting=True, threads=False)
        policy.executor_starts(gain=1.0, uncounted=1)
        assert executor_blocks(policy, clock, [1e-4] * 6)[: tasks + 1] == [KEEP] * tasks + [
            TAKE_BACK
        ]


def test_the_probe_after_taking_back_settles_where_the_work_is_faster() -> None:
    policy, clock = measured_here(1e-5)
    executor_blocks(policy, clock, [1e-4] * 5)  # lost
    policy.takes_back()
    assert own_blocks(policy, clock, [1e-5] * 3) == [KEEP, KEEP, FALL_BACK]
    figures = policy.fallback(position=600)
    assert figures.position == 600 and figures.fallbacks == 1
    assert (figures.waited, figures.own) == pytest.approx((1e-4, 1e-5))
    assert figures.retry_after == pytest.approx(16 * policy.trial_seconds)
    # Reading here measured dearer than the executor's wait: it takes the work back.
    policy, clock = measured_here(1e-5)
    executor_blocks(policy, clock, [1e-4] * 5)
    policy.takes_back()
    assert own_blocks(policy, clock, [1e-3] * 3) == [KEEP, KEEP, HAND_OVER]
    policy.executor_starts(gain=1.0, uncounted=1)
    assert policy.judged, "won a probe: it starts judged"


def test_the_side_not_in_use_is_tried_again_after_a_growing_backoff() -> None:
    policy, clock = measured_here(1e-5)
    executor_blocks(policy, clock, [1e-4] * 5)
    policy.takes_back()
    own_blocks(policy, clock, [1e-5] * 3)  # FALL_BACK
    retry_at = policy.retry_at
    first_wait = retry_at - clock.now()
    decisions = []
    while not decisions or decisions[-1] is KEEP:
        before = clock.now()
        decisions += own_blocks(policy, clock, [1e-5])  # a block of 1 ms
    assert decisions[-1] is RETRY and before < retry_at <= clock.now()
    # Tried again, it loses again: the next retry waits twice as long.
    policy.executor_starts(gain=1.0, uncounted=1)
    assert executor_blocks(policy, clock, [1e-4] * 5)[-1] is TAKE_BACK
    policy.takes_back()
    assert own_blocks(policy, clock, [1e-5] * 3)[-1] is FALL_BACK
    assert policy.retry_at - clock.now() == pytest.approx(2 * first_wait)


def test_the_executor_is_retried_at_once_when_reading_here_gets_dearer_than_its_wait() -> None:
    policy, clock = measured_here(1e-5)
    executor_blocks(policy, clock, [1e-4] * 5)
    policy.takes_back()
    own_blocks(policy, clock, [1e-5] * 3)  # FALL_BACK, long before retry_at
    assert own_blocks(policy, clock, [1e-5, 1e-3]) == [KEEP, KEEP], "the least cost counts"
    policy.own_costs.clear()
    assert own_blocks(policy, clock, [1e-3]) == [RETRY]
    assert clock.now() < policy.retry_at


def test_the_side_with_the_work_keeps_it_unless_the_other_is_a_margin_faster() -> None:
    policy, clock = measured_here(1e-4)
    assert executor_blocks(policy, clock, [0.95e-4] * 5)[-1] is KEEP  # barely faster: won
    # It has the work now: reading here must be 1.2 times faster to take it.
    policy.own_costs.extend([0.9e-4])
    assert executor_blocks(policy, clock, [1e-4] * 4)[-1] is KEEP
    policy.own_costs.extend([0.8e-4])
    assert executor_blocks(policy, clock, [1e-4] * 4)[-1] is TAKE_BACK


def test_what_the_stages_above_cost_on_each_side_counts_in_the_judgement() -> None:
    # The executor's wait (6 µs) is dearer than reading here (3 µs), but the stages above
    # cost 16 µs more an element read here (a batch stacking views, not contiguous rows).
    for above_here, decision in ((0.0, TAKE_BACK), (16e-6, KEEP)):
        policy, clock = measured_here(3e-6)
        policy.note_above(False, above_here)
        policy.note_above(True, 0.0)
        policy.note_above(True, -1.0)  # a block used up within the `next` that read it: nothing
        assert executor_blocks(policy, clock, [6e-6] * 5)[-1] is decision


def test_threads_must_keep_the_consumer_waiting_less_by_their_gain() -> None:
    for wait, decision in ((0.6e-4, KEEP), (0.7e-4, TAKE_BACK)):  # against 1e-4 here, gain 1.5
        clock = ScriptedClock()
        policy = ExecutorPolicy(clock=clock)
        policy.own_block(1e-4, True, executor=False, starting=False, threads=True)
        policy.executor_starts(gain=1.5, uncounted=1)
        assert executor_blocks(policy, clock, [wait] * 5, own_threads=True)[-1] is decision


def test_threads_start_after_waiting_blocks_in_a_row() -> None:
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)

    def block(waited: bool, threads: bool = True) -> Decision:
        return policy.own_block(1e-3, waited, executor=False, starting=False, threads=threads)

    assert [block(True), block(True), block(False), block(True), block(True)] == [KEEP] * 5
    assert block(True) is HAND_OVER  # the third waiting block in a row
    assert [block(True, threads=False) for _ in range(5)] == [KEEP] * 5  # none allowed
    assert not reading_waits(cpu=0.0, wall=0.0004)  # too short to say anything


def test_the_executor_starts_after_start_after_seconds_read_here_or_at_once_when_costly() -> None:
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)
    own_blocks(policy, clock, [1e-5] * 9, elements=1000, executor=True)  # 0.09 s
    assert policy.starting() is KEEP
    own_blocks(policy, clock, [1e-5] * 91, elements=1000, executor=True)  # 1 s in all
    assert policy.starting() is HAND_OVER
    # An element as dear as `start_at_once` starts it after two blocks.
    costly = ExecutorPolicy(clock=clock)
    own_blocks(costly, clock, [1e-4], executor=True)
    assert costly.starting() is KEEP
    own_blocks(costly, clock, [1e-4], executor=True)
    assert costly.starting() is HAND_OVER
    # `start_prefetch` asks at once; a pinned executor is asked at once; so is one tuned so.
    asked = ExecutorPolicy(clock=clock)
    asked.ask_to_start()
    assert asked.starting() is HAND_OVER
    assert ExecutorPolicy(clock=clock, adaptive=False).starting() is HAND_OVER
    tuned = ExecutorPolicy(Tuning(start_after=0.01), clock)
    own_blocks(tuned, clock, [1e-5] * 10, executor=True)
    assert tuned.starting() is HAND_OVER


def test_an_executor_costly_to_start_waits_start_costs_times_its_start() -> None:
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)
    own_blocks(policy, clock, [1e-5] * 1_000, elements=100, executor=True)  # 1 s here
    assert policy.starting(lambda: 0.5) is KEEP  # 5 s of reading here first
    own_blocks(policy, clock, [1e-5] * 3_999, elements=100, executor=True)
    assert policy.starting(lambda: 0.5) is KEEP
    own_blocks(policy, clock, [1e-5] * 2, elements=100, executor=True)
    assert policy.starting(lambda: 0.5) is HAND_OVER


def test_a_starting_executor_and_a_pinned_one_are_not_judged() -> None:
    clock = ScriptedClock()
    policy = ExecutorPolicy(clock=clock)
    assert [
        policy.own_block(1e-3, True, executor=True, starting=True, threads=True) for _ in range(5)
    ] == [KEEP] * 5
    pinned = ExecutorPolicy(clock=clock, adaptive=False)
    pinned.own_block(1e-5, False, executor=True, starting=True, threads=False)
    pinned.executor_starts(gain=1.0, uncounted=1)
    assert set(executor_blocks(pinned, clock, [1.0] * 10)) == {KEEP}


def test_a_block_failed_on_the_executor_pins_the_work_there() -> None:
    policy, clock = measured_here(1e-5)
    policy.executor_failed(for_good=True)
    assert set(executor_blocks(policy, clock, [1e-3] * 10)) == {KEEP}
    threads, clock = measured_here(1e-5)
    threads.executor_failed(for_good=False)  # threads: the work may still move
    assert executor_blocks(threads, clock, [1e-3] * 5)[-1] is TAKE_BACK


def test_tasks_are_a_quarter_of_their_time_on_trial() -> None:
    policy, _ = measured_here(1e-5)
    task, element = 2**-7, 2**-16  # 512 elements' work: exact in binary
    assert policy.task_size(task, element, starting=True) == 128
    assert policy.task_size(task, element) == 128  # not judged yet
    policy.judged = True
    assert policy.task_size(task, element) == 512
    assert policy.task_size(task, element / 4) == DEFAULT_TUNING.max_task
    assert policy.task_size(task, 0.0) == DEFAULT_TUNING.max_task
    assert ExecutorPolicy(adaptive=False).task_size(task, element, starting=True) == 512


def test_a_reader_makes_the_same_decisions_for_the_same_scripted_costs() -> None:
    """The decisions of a reader whose costs change twice, in order: no clock but the script."""

    def here(x: int) -> float:
        return phases(x, (1_000, 1e-3), (5_000, 1e-5), (12_000, 3e-3))

    def ahead(x: int) -> float:
        return phases(x, (1_000, 1e-4), (5_000, 2e-3), (12_000, 1e-4))

    runs = [decisions_of(here, ahead) for _ in range(2)]
    assert runs[0] == runs[1]
    [(lost, lost_at), (settled, settled_at), (retried, retried_at)] = runs[0]
    # Early in the second phase the executor loses, and a probe here confirms it; early in
    # the third, reading here costs more than the executor's wait did: it is tried again,
    # and keeps the work to the end.
    assert (lost, settled, retried) == (TAKE_BACK, FALL_BACK, RETRY)
    assert 1_000 < lost_at < settled_at < 1_500 and 5_000 < retried_at < 6_000


def decisions_of(
    here: Callable[[int], float], ahead: Callable[[int], float]
) -> list[tuple[Decision, int]]:
    """The decisions other than KEEP of a reader over `range(12_000)`, with the position read."""
    clock = ScriptedClock()

    def element(x: int) -> int:
        clock.advance(here(x))
        return x

    executor = ScriptedExecutor(clock, ahead)
    reader = BlockReader(fn.map(element, fn.range(12_000)), 0, executor=executor, clock=clock)
    decisions: list[tuple[Decision, int]] = []
    for name in ("own_block", "executor_block"):
        decide = getattr(reader.policy, name)

        def noted(*args: Any, decide: Any = decide, **kwargs: Any) -> Decision:
            decision = decide(*args, **kwargs)
            if decision is not KEEP:
                decisions.append((decision, reader.position))
            return decision

        setattr(reader.policy, name, noted)
    assert read_reader(reader) == list(range(12_000))
    return decisions


# ---------------------------------------------------------------------------
# The reader's decisions, on a clock the test moves.


class ScriptedTask:
    def __init__(self, executor: ScriptedExecutor, first: int, stop: int) -> None:
        self.executor, self.first, self.stop = executor, first, stop

    def result(self) -> Result:
        executor = self.executor
        executor.events.append(("result", self.first, executor.clock.now()))
        seconds = sum(executor.cost(x) for x in range(self.first, self.stop))
        executor.clock.advance(seconds, 0.0)  # the consumer waits for all of it
        return list(range(self.first, self.stop)), None, seconds

    def cancel(self) -> bool:
        raise AssertionError("a given executor's blocks in flight are taken, not dropped")


class ScriptedExecutor:
    """Like worker processes: reads blocks from the start, is kept while the consumer reads,
    and keeps the consumer waiting `cost(x)` seconds of `clock` for element `x`."""

    task_seconds = 0.01
    max_tasks = 4

    def __init__(self, clock: ScriptedClock, cost: Callable[[int], float]) -> None:
        self.clock, self.cost = clock, cost
        self.read: list[int] = []
        self.stops: dict[int, int] = {}  # of each block, by its first position
        self.events: list[tuple[str, int, float]] = []  # ("submit" | "result", first, time)
        self.fallbacks: list[Fallback] = []

    def submit(self, first: int, stop: int) -> ScriptedTask:
        self.read.extend(range(first, stop))
        self.stops[first] = stop
        self.events.append(("submit", first, self.clock.now()))
        return ScriptedTask(self, first, stop)

    def close(self) -> None:
        """What the reader calls at the end (a worker pool's executor does nothing then)."""

    def note_fallback(self, figures: Fallback) -> None:
        self.fallbacks.append(figures)


def read_scripted(
    n: int, here: Callable[[int], float], ahead: Callable[[int], float]
) -> tuple[list[int], ScriptedExecutor, BlockReader]:
    """Reads `range(n)` through a ScriptedExecutor costing `ahead(x)` per element, reading
    element x here costing `here(x)`; returns the positions read here, in order."""
    clock = ScriptedClock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.advance(here(x))
        read_here.append(x)
        return x

    executor = ScriptedExecutor(clock, ahead)
    reader = BlockReader(fn.map(element, fn.range(n)), 0, executor=executor, clock=clock)
    got: list[int] = []
    while True:
        try:
            first, block = reader.read()
        except StopIteration:
            break
        assert first == len(got)
        got += block
    assert got == list(range(n))
    assert sorted(read_here + executor.read) == list(range(n)), "an element read twice or never"
    return read_here, executor, reader


def test_work_too_cheap_for_the_executor_is_read_here_after_one_trial() -> None:
    read_here, executor, reader = read_scripted(20_000, lambda x: 1e-6, lambda x: 1e-4)
    # The first round (start-up), a trial of `max_task` positions, then the blocks in flight.
    assert DEFAULT_TUNING.max_task <= len(executor.read) < DEFAULT_TUNING.max_task + 200
    assert executor.read == list(range(len(executor.read)))
    assert read_here == list(range(len(executor.read), 20_000))
    assert reader.fallbacks == 1
    [figures] = executor.fallbacks
    assert figures.position == len(executor.read)
    assert figures.own == pytest.approx(1e-6)
    assert figures.waited == pytest.approx(1e-4)
    assert figures.executor == pytest.approx(1e-4)
    assert figures.fallbacks == 1 and figures.retry_after > 0


def test_work_worth_the_executor_stays_there_but_for_a_few_probes() -> None:
    read_here, executor, reader = read_scripted(100_000, lambda x: 1e-3, lambda x: 1e-4)
    assert len(read_here) < 1_000  # 1%
    assert reader.fallbacks == 0 and not executor.fallbacks
    # Reading here is measured again, less and less often.
    probes = [x for k, x in enumerate(read_here) if k == 0 or read_here[k - 1] != x - 1]
    assert len(probes) >= 3
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert all(later > 1.5 * earlier for earlier, later in itertools.pairwise(gaps))


def test_the_executor_is_tried_again_less_and_less_often() -> None:
    n = 700_000
    read_here, executor, reader = read_scripted(n, lambda x: 1e-5, lambda x: 2e-5)
    stints = stints_of(executor)
    assert len(stints) >= 4 and reader.fallbacks == len(stints)
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(stints)]
    assert all(later > 1.5 * earlier for earlier, later in itertools.pairwise(gaps))
    assert len(read_here) > 0.99 * n


def stints_of(executor: ScriptedExecutor) -> list[tuple[float, float]]:
    """(first submit, last result) times of each run of consecutive blocks the executor read."""
    stints: list[tuple[float, float]] = []
    follows = None
    for kind, first, time_ in executor.events:
        if kind == "submit":
            if first != follows:  # not the block after the last one: a new stint
                stints.append((time_, time_))
            follows = executor.stops[first]
        else:
            stints[-1] = (stints[-1][0], time_)
    return stints


def phases(x: int, *costs: tuple[int, float]) -> float:
    """The cost of the first phase `(stop, cost)` that `x` is before."""
    return next(cost for stop, cost in costs if x < stop)


def test_the_work_moves_both_ways_when_costs_change_mid_run_losing_nothing() -> None:
    """Executor faster, then reading here (the executor loses with blocks in flight), then
    the executor again (tried again once reading here costs more than it did)."""

    def here(x: int) -> float:
        return phases(x, (1_000, 1e-3), (5_000, 1e-5), (12_000, 3e-3))

    def ahead(x: int) -> float:
        return phases(x, (1_000, 1e-4), (5_000, 2e-3), (12_000, 1e-4))

    read_here, executor, reader = read_scripted(12_000, here, ahead)
    ahead_set = set(executor.read)
    assert sum(x in ahead_set for x in range(1_000)) > 900
    # It lost early in the second phase; the blocks it then had in flight were taken.
    went_here = min(x for x in read_here if x >= 1_000)
    assert went_here < 1_500 and set(range(went_here, 5_000)) <= set(read_here)
    before = [(kind, first) for kind, first, _ in executor.events if first < went_here]
    last_submit = max(k for k, (kind, _) in enumerate(before) if kind == "submit")
    assert len(before[last_submit + 1 :]) >= 3, "the loss was judged with blocks in flight"
    # Back to the executor in the third phase, once reading here was measured dearer,
    # but for a few blocks that measure reading here again.
    back = min(x for x in executor.read if x >= 5_000)
    assert back < 6_000
    assert sum(x in ahead_set for x in range(back, 12_000)) > 0.95 * (12_000 - back)
    assert reader.fallbacks == 1 and executor.fallbacks[0].position == went_here


def read_metered(metered: bool) -> tuple[list[int], ScriptedExecutor]:
    """A run where the executor's wait (6 µs an element) is dearer than reading here (3 µs),
    but the stage above costs 19 µs an element read here and 3 µs one from the executor (a
    batch stacking the flipped views read here, or the contiguous rows workers send)."""
    clock, meter = ScriptedClock(), Meter()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.advance(3e-6)
        read_here.append(x)
        return x

    executor = ScriptedExecutor(clock, lambda x: 6e-6)
    dataset = fn.map(element, fn.range(200_000))
    reader = BlockReader(
        dataset, 0, executor=executor, clock=clock, meter=meter if metered else None
    )
    got: list[int] = []
    while True:
        started = clock.now()  # one `next` of the pipeline reads a block and the stage uses it
        try:
            block = reader.read()[1]
        except StopIteration:
            break
        clock.advance(len(block) * (3e-6 if block[0] in executor.stops else 19e-6))
        meter.seconds += clock.now() - started
        got += block
    assert got == list(range(200_000))
    return read_here, executor


def test_with_a_meter_the_stages_above_the_read_count_in_the_judgement() -> None:
    read_here, _ = read_metered(metered=True)
    assert len(read_here) < 0.1 * 200_000, f"{len(read_here)} elements read here"
    read_here, _ = read_metered(metered=False)  # the read alone: here is cheaper
    assert len(read_here) > 0.9 * 200_000, f"{len(read_here)} elements read here"


class StartingExecutor(ScriptedExecutor):
    """A ScriptedExecutor that says it is starting (`ready()` False) for `starting` seconds."""

    def __init__(self, clock: ScriptedClock, cost: Callable[[int], float], starting: float) -> None:
        super().__init__(clock, cost)
        self.ready_at = starting
        self.asked = 0

    def ready(self) -> bool:
        self.asked += 1
        return self.clock.now() >= self.ready_at


def read_starting(n: int, here: float, ahead: float, starting: float, **options: Any) -> Any:
    clock = ScriptedClock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.advance(here)
        read_here.append(x)
        return x

    executor = StartingExecutor(clock, lambda x: ahead, starting)
    reader = BlockReader(fn.map(element, fn.range(n)), 0, executor=executor, clock=clock, **options)
    got: list[int] = []
    while True:
        try:
            got += reader.read()[1]
        except StopIteration:
            break
    assert got == list(range(n))
    assert sorted(read_here + executor.read) == list(range(n)), "an element read twice or never"
    return read_here, executor, reader


def test_while_the_executor_starts_the_consumer_reads_then_hands_it_the_work() -> None:
    # Reading here costs 1 ms an element; the executor, 0.1 ms once it is up after 2 s.
    read_here, executor, reader = read_starting(20_000, 1e-3, 1e-4, starting=2.0)
    started = min(executor.read)
    assert read_here[:started] == list(range(started)), "the consumer waited for the start"
    assert 1_900 <= started <= 2_100  # about 2 s of reading here
    assert sum(x >= started for x in read_here) < 0.02 * (20_000 - started)
    assert (reader.read_here, reader.read_ahead) == (len(read_here), len(executor.read))


def test_an_executor_still_starting_when_the_data_ends_reads_nothing() -> None:
    read_here, executor, _ = read_starting(1_500, 1e-3, 1e-4, starting=2.0)
    assert read_here == list(range(1_500)) and executor.read == []
    assert executor.asked > 1


def test_a_run_shorter_than_start_after_never_starts_the_executor() -> None:
    cheap = DEFAULT_TUNING.start_at_once / 2
    n = (
        int(DEFAULT_TUNING.start_after / cheap) - 50
    )  # reading it all here takes less than `start_after`
    read_here, executor, _ = read_starting(n, cheap, cheap / 10, starting=0.0)
    assert read_here == list(range(n)) and executor.asked == 0


class CostlyStart(StartingExecutor):
    """A StartingExecutor whose readying costs `start_cost` seconds (a big source to copy)."""

    start_cost = 0.5

    def start_seconds(self) -> float:
        return self.start_cost


def test_an_executor_that_costs_to_start_waits_start_costs_times_that() -> None:
    clock = ScriptedClock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.advance(DEFAULT_TUNING.start_at_once / 2)  # cheap: never started at once
        read_here.append(x)
        return x

    executor = CostlyStart(clock, lambda x: 1e-6, starting=0.0)
    reader = BlockReader(fn.map(element, fn.range(200_000)), 0, executor=executor, clock=clock)
    while not executor.asked:
        reader.read()
    waited = reader.here_seconds
    assert (
        DEFAULT_TUNING.start_costs * CostlyStart.start_cost
        <= waited
        < DEFAULT_TUNING.start_costs * CostlyStart.start_cost + 0.1
    )


def test_costly_elements_start_the_executor_at_once() -> None:
    # 1 ms an element here: processes pay for that from the first seconds.
    read_here, executor, _ = read_starting(
        2_000, 10 * DEFAULT_TUNING.start_at_once, 1e-4, starting=0.0
    )
    started = min(executor.read)
    assert executor.asked == 1 and started < 10, f"asked after {started} elements read here"
    assert read_here[:started] == list(range(started))


def test_start_prefetch_asks_for_the_executor_at_once() -> None:
    clock = ScriptedClock()
    executor = StartingExecutor(clock, lambda x: 1e-4, starting=0.0)
    reader = BlockReader(fn.range(1_000), 0, executor=executor, clock=clock)
    reader.start_prefetch()
    assert executor.asked == 1 and executor.read[:1] == [0]  # ready at once: the work is its


def test_without_reads_while_starting_the_executor_has_the_work_from_the_first_block() -> None:
    options = {"read_while_starting": False}
    _, executor, _ = read_starting(5_000, 1e-3, 1e-4, starting=2.0, **options)
    assert executor.read[:100] == list(range(100)) and executor.asked == 0


def test_not_adaptive_leaves_every_block_to_the_executor() -> None:
    clock = ScriptedClock()
    executor = ScriptedExecutor(clock, lambda x: 1e-3)
    reader = BlockReader(fn.range(5_000), 0, executor=executor, adaptive=False, clock=clock)
    got = []
    with pytest.raises(StopIteration):
        while True:
            got += reader.read()[1]
    assert got == list(range(5_000)) and executor.read == got and not executor.fallbacks
    # Never on trial: its blocks are a whole `task_seconds` of work, not a trial's quarter.
    sizes = {stop - first for first, stop in executor.stops.items()}
    assert max(sizes) == round(executor.task_seconds / 1e-3)


class InterruptedExecutor(ScriptedExecutor):
    """Ctrl-C lands in every third `submit`: before its call was made, or after."""

    def __init__(self, clock: ScriptedClock, after_the_call: bool) -> None:
        super().__init__(clock, lambda x: 1e-3)
        self.after_the_call, self.calls = after_the_call, 0

    def submit(self, first: int, stop: int) -> ScriptedTask:
        self.calls += 1
        if self.calls % 3 and not self.after_the_call:
            return super().submit(first, stop)
        task = super().submit(first, stop) if self.after_the_call else None
        if self.calls % 3 == 0:
            raise KeyboardInterrupt
        assert task is not None
        return task


@pytest.mark.parametrize("after_the_call", [False, True])
def test_an_interrupt_while_blocks_are_sent_or_handed_out_loses_and_repeats_nothing(
    after_the_call: bool,
) -> None:
    clock = ScriptedClock()
    executor = InterruptedExecutor(clock, after_the_call)
    reader = BlockReader(fn.range(3_000), 0, executor=executor, adaptive=False, clock=clock)
    got: list[int] = []
    interrupts = 0
    while True:
        try:
            first, block = reader.read()
        except KeyboardInterrupt:
            interrupts += 1
            continue
        except StopIteration:
            break
        assert first == len(got)
        got += block
    assert got == list(range(3_000))
    assert interrupts >= 10


# ---------------------------------------------------------------------------
# Real worker processes.


def image_of(x: int) -> np.ndarray:
    """A small image that a flip changes."""
    image = np.full((8, 8, 3), x % 256, np.uint8)
    image[0, 0, 0] = 255 - x % 256
    return image


def flip_with_pid(x: int) -> tuple[int, np.ndarray, int]:
    """Cheap: a small image flipped; where it was computed."""
    return x, np.flip(image_of(x), axis=1), os.getpid()


def pid_of(x: int) -> tuple[int, int]:
    return x, os.getpid()


def read_all(stream: Any, state: Any = None) -> list[Any]:
    it = fn.iterate(stream, state)
    try:
        return list(it)
    finally:
        it.close()


def read_on_workers(
    pipeline: Any, here: float, ahead: float, tuning: Tuning = DEFAULT_TUNING
) -> tuple[list[Any], CostedExecutor, BlockReader]:
    """Reads `pipeline` with real worker processes, already up, on a scripted clock.

    An element read here costs `here` seconds, and a block from the workers
    keeps the consumer waiting `ahead` seconds an element, however long each
    really takes: where each block is read is the same on any machine. Where
    an element was read is recorded in it (the process id).
    """
    clock = ScriptedClock()
    pool = ready_pool(pipeline)
    executor = CostedExecutor(LeafExecutor(pool, 0), clock, ahead)
    here_read = charged(pipeline, clock, here)  # the workers read their own, uncharged
    reader = BlockReader(here_read, 0, executor=executor, clock=clock, tuning=tuning)
    try:
        return read_reader(reader), executor, reader
    finally:
        reader.close()
        pool.close()


def runs_of(got: list[Any]) -> list[tuple[bool, int, int]]:
    """`(read here, first, stop)` of each run of elements read on one side, in order."""
    runs: list[tuple[bool, int, int]] = []
    for x, *_, pid in got:
        here = pid == os.getpid()
        if runs and runs[-1][0] == here:
            runs[-1] = (here, runs[-1][1], x + 1)
        else:
            runs.append((here, x, x + 1))
    return runs


def test_cheap_work_moves_from_worker_processes_to_the_consumer() -> None:
    # Here 1 µs an element, from the workers 10 µs: they are asked after `start_after`
    # (10 ms here: 10,000 elements), lose their trial, and the rest is read here.
    n = 40_000
    pipeline = fn.map(flip_with_pid, fn.range(n))
    got, executor, reader = read_on_workers(pipeline, 1e-6, 1e-5, Tuning(start_after=0.01))
    assert [x for x, _, _ in got] == list(range(n))
    assert all(np.array_equal(image, np.flip(image_of(x), axis=1)) for x, image, _ in got)
    runs = runs_of(got)
    started, back = runs[1][1], runs[1][2]
    assert runs == [(True, 0, started), (False, started, back), (True, back, n)]
    assert 10_000 <= started < 10_000 + DEFAULT_TUNING.max_task  # the block that passed 10 ms
    assert back - started < n // 4 and reader.fallbacks == 1
    assert executor.blocks[0][0] == started and executor.blocks[-1][1] == back
    assert_nothing_left()


def test_expensive_work_stays_in_worker_processes() -> None:
    # Here 10 ms an element, from the workers 0.1 ms: they are asked after two blocks here
    # (an element dearer than `start_at_once`), win, and keep the work but for a few probes.
    n = 2_000
    got, _, reader = read_on_workers(fn.map(pid_of, fn.range(n)), 1e-2, 1e-4)
    assert [x for x, _ in got] == list(range(n))
    runs = runs_of(got)
    assert runs[0] == (True, 0, 2) and runs[1][0] is False and runs[-1][0] is False
    here = sum(stop - first for read_here, first, stop in runs if read_here)
    assert here <= n // 20, f"{here} of {n} elements read here"
    assert reader.fallbacks == 0
    assert_nothing_left()


def test_states_are_those_of_the_consumer_alone_across_the_moves() -> None:
    def build(workers: int | None) -> Any:
        ds = fn.filter(lambda x: x % 3 != 1, fn.map(lambda x: x * 2, fn.range(30_000)))
        stream = fn.batch(5, fn.from_dataset(ds))
        return stream if workers is None else fn.mp_prefetch(workers, stream)

    plain, moved = fn.iterate(build(None)), fn.iterate(build(2))
    expected, saved = [], None
    try:
        for k, (a, b) in enumerate(zip(plain, moved, strict=True)):
            assert np.array_equal(a, b), f"batch {k}"
            expected.append(a)
            if k % 97 == 0:
                assert moved.state == plain.state, f"state after batch {k}"
            if k == 3_000:  # long after the work moved to the consumer
                saved = fn.state_to_dict(build(2), moved.state)
    finally:
        moved.close()
    assert saved is not None
    for workers in (2, None):
        stream = build(workers)
        rest = read_all(stream, fn.state_from_dict(stream, saved))
        assert len(rest) == len(expected) - 3_001
        assert all(np.array_equal(a, b) for a, b in zip(rest, expected[3_001:], strict=True))


@pytest.mark.parametrize("how", ["adaptive=False", "worker_init_fn"])
def test_pinned_work_stays_in_the_workers_however_cheap(how: str) -> None:
    options: dict[str, Any] = (
        {"adaptive": False} if how == "adaptive=False" else {"worker_init_fn": _nothing}
    )
    stream = fn.mp_prefetch(2, fn.from_dataset(fn.map(flip_with_pid, fn.range(20_000))), **options)
    got = read_all(stream)
    assert [x for x, _, _ in got] == list(range(20_000))
    assert not any(pid == os.getpid() for _, _, pid in got)


def _nothing(index: int, count: int) -> None:
    del index, count


def ready_pool(dataset: Any, workers: int = 2) -> WorkerPool:
    """A pool whose workers are up: a reader over it gives them the work from the start."""
    pool = WorkerPool([dataset], workers)
    wait_until(pool.ready, "the workers started")
    return pool


def test_after_a_block_fails_in_a_worker_the_work_stays_in_the_workers(tmp_path: Path) -> None:
    # Twice: a block read fails, and so does its position read alone (see `read_block`).
    fault = Fault(str(tmp_path), frozenset({3}), "raise", times=2)
    pipeline = fn.map(lambda x: (x, os.getpid()), fn.map(fault, fn.range(20_000)))
    pool = ready_pool(pipeline)
    reader = BlockReader(pipeline, 0, executor=LeafExecutor(pool, 0))
    reader.start_prefetch()  # the executor at once, not after `start_after` seconds here
    head: list[Any] = []
    try:
        with pytest.raises(Exception, match="fault injected at element 3"):
            while True:
                head += reader.read()[1]
        assert len(head) == 3
        rest = read_reader(reader)
    finally:
        reader.close()
        pool.close()
    assert [x for x, _ in head + rest] == list(range(20_000))
    assert not any(pid == os.getpid() for _, pid in head + rest)


def test_while_the_workers_start_the_consumer_reads() -> None:
    # The workers cannot load the pipeline until the consumer has read 50 elements itself.
    pipeline = fn.map(lambda x: (x, os.getpid()), fn.range(5_000))
    gate = Path(tempfile.mkdtemp()) / "open"
    gated = gated_load(pipeline, str(gate))
    it = fn.iterate(fn.mp_prefetch(2, fn.from_dataset(gated)))
    try:
        head = list(itertools.islice(it, 50))  # would wait for good if it waited for them
        assert all(pid == os.getpid() for _, pid in head)
        gate.touch()
        rest = list(it)
    finally:
        gate.touch()
        it.close()
    assert [x for x, _ in head + rest] == list(range(5_000))


# ---------------------------------------------------------------------------
# Real threads.


def thread_of(x: int) -> tuple[int, str]:
    return x, threading.current_thread().name


def read_with_threads(n: int, here: float, waits: bool) -> list[tuple[int, str]]:
    """Reads `thread_of` over `range(n)` allowed 8 real threads, on a scripted clock: an element
    read here costs `here` seconds (computing, or waiting if `waits`), from the threads a
    tenth of that."""
    clock = ScriptedClock()
    data = fn.map(thread_of, fn.range(n))

    def threads() -> CostedExecutor:
        return CostedExecutor(ThreadExecutor(data, 8, 500), clock, here / 10)

    reader = BlockReader(charged(data, clock, here, waits), 0, 8, clock=clock, thread_pool=threads)
    try:
        return read_reader(reader)
    finally:
        reader.close()


def test_threads_read_waiting_work_and_never_cheap_work() -> None:
    consumer = threading.current_thread().name
    cheap = read_with_threads(50_000, 1e-5, waits=False)
    assert cheap == [(x, consumer) for x in range(50_000)]
    waiting = read_with_threads(600, 1e-3, waits=True)  # a file, a network: 1 ms an element
    assert [x for x, _ in waiting] == list(range(600))
    # Three blocks of it waited (1, 2 and 2 elements), and the threads had the rest.
    assert all(name == consumer for _, name in waiting[:5])
    assert all(name.startswith("grainfn-read") for _, name in waiting[5:])
