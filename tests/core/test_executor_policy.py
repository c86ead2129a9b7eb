"""An executor earns its place: work too cheap for it is read in the consumer, with the same output.

The policy itself runs on a clock the test moves (`ScriptedExecutor`): where
every block was read is then exact. Real worker processes and threads are
checked on work that is either clearly cheap (a numpy flip) or clearly
expensive (a sleep of milliseconds per element), so that the decision is the
same on any machine, however busy; where an element was read is recorded in
it (the process id, or the thread).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.blocks import (
    MAX_TASK,
    START_AFTER,
    START_AT_ONCE,
    START_COSTS,
    BlockReader,
    Fallback,
    Meter,
    Result,
)
from grainfn._src.parallel.processes import LeafExecutor, WorkerPool

from faults.faulty import Fault
from support.gated import gated_load
from support.leaks import assert_nothing_left
from support.waiting import wait_until

# ---------------------------------------------------------------------------
# The policy on a clock the test moves.


class Clock:
    """A clock that moves only when told: by reading an element here, or waiting for a block."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedTask:
    def __init__(self, executor: ScriptedExecutor, first: int, stop: int) -> None:
        self.executor, self.first, self.stop = executor, first, stop

    def result(self) -> Result:
        executor = self.executor
        executor.events.append(("result", self.first, executor.clock.now))
        seconds = sum(executor.cost(x) for x in range(self.first, self.stop))
        executor.clock.now += seconds  # the consumer waits for all of it
        return list(range(self.first, self.stop)), None, seconds

    def cancel(self) -> bool:
        raise AssertionError("a given executor's blocks in flight are taken, not dropped")


class ScriptedExecutor:
    """Like worker processes: reads blocks from the start, is kept while the consumer reads,
    and keeps the consumer waiting `cost(x)` seconds of `clock` for element `x`."""

    task_seconds = 0.01
    max_tasks = 4

    def __init__(self, clock: Clock, cost: Callable[[int], float]) -> None:
        self.clock, self.cost = clock, cost
        self.read: list[int] = []
        self.stops: dict[int, int] = {}  # of each block, by its first position
        self.events: list[tuple[str, int, float]] = []  # ("submit" | "result", first, time)
        self.fallbacks: list[Fallback] = []

    def submit(self, first: int, stop: int) -> ScriptedTask:
        self.read.extend(range(first, stop))
        self.stops[first] = stop
        self.events.append(("submit", first, self.clock.now))
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
    clock = Clock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.now += here(x)
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
    # The first round (start-up), a trial of MAX_TASK positions, then the blocks in flight.
    assert MAX_TASK <= len(executor.read) < MAX_TASK + 200
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
    clock, meter = Clock(), Meter()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.now += 3e-6
        read_here.append(x)
        return x

    executor = ScriptedExecutor(clock, lambda x: 6e-6)
    dataset = fn.map(element, fn.range(200_000))
    reader = BlockReader(
        dataset, 0, executor=executor, clock=clock, meter=meter if metered else None
    )
    got: list[int] = []
    while True:
        started = clock.now  # one `next` of the pipeline reads a block and the stage uses it
        try:
            block = reader.read()[1]
        except StopIteration:
            break
        clock.now += len(block) * (3e-6 if block[0] in executor.stops else 19e-6)
        meter.seconds += clock.now - started
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

    def __init__(self, clock: Clock, cost: Callable[[int], float], starting: float) -> None:
        super().__init__(clock, cost)
        self.ready_at = starting
        self.asked = 0

    def ready(self) -> bool:
        self.asked += 1
        return self.clock.now >= self.ready_at


def read_starting(n: int, here: float, ahead: float, starting: float, **options: Any) -> Any:
    clock = Clock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.now += here
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
    cheap = START_AT_ONCE / 2
    n = int(START_AFTER / cheap) - 50  # reading it all here takes less than START_AFTER
    read_here, executor, _ = read_starting(n, cheap, cheap / 10, starting=0.0)
    assert read_here == list(range(n)) and executor.asked == 0


class CostlyStart(StartingExecutor):
    """A StartingExecutor whose readying costs `start_cost` seconds (a big source to copy)."""

    start_cost = 0.5

    def start_seconds(self) -> float:
        return self.start_cost


def test_an_executor_that_costs_to_start_waits_start_costs_times_that() -> None:
    clock = Clock()
    read_here: list[int] = []

    def element(x: int) -> int:
        clock.now += START_AT_ONCE / 2  # cheap: never started at once
        read_here.append(x)
        return x

    executor = CostlyStart(clock, lambda x: 1e-6, starting=0.0)
    reader = BlockReader(fn.map(element, fn.range(200_000)), 0, executor=executor, clock=clock)
    while not executor.asked:
        reader.read()
    waited = reader.here_seconds
    assert (
        START_COSTS * CostlyStart.start_cost <= waited < START_COSTS * CostlyStart.start_cost + 0.1
    )


def test_costly_elements_start_the_executor_at_once() -> None:
    # 1 ms an element here: processes pay for that from the first seconds.
    read_here, executor, _ = read_starting(2_000, 10 * START_AT_ONCE, 1e-4, starting=0.0)
    started = min(executor.read)
    assert executor.asked == 1 and started < 10, f"asked after {started} elements read here"
    assert read_here[:started] == list(range(started))


def test_start_prefetch_asks_for_the_executor_at_once() -> None:
    clock = Clock()
    executor = StartingExecutor(clock, lambda x: 1e-4, starting=0.0)
    reader = BlockReader(fn.range(1_000), 0, executor=executor, clock=clock)
    reader.start_prefetch()
    assert executor.asked == 1 and executor.read[:1] == [0]  # ready at once: the work is its


def test_without_reads_while_starting_the_executor_has_the_work_from_the_first_block() -> None:
    options = {"read_while_starting": False}
    _, executor, _ = read_starting(5_000, 1e-3, 1e-4, starting=2.0, **options)
    assert executor.read[:100] == list(range(100)) and executor.asked == 0


def test_not_adaptive_leaves_every_block_to_the_executor() -> None:
    clock = Clock()
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

    def __init__(self, clock: Clock, after_the_call: bool) -> None:
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
    clock = Clock()
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


def sleep_with_pid(x: int) -> tuple[int, int]:
    """Expensive: 10 ms of waiting, which reading here pays in full and 4 workers share.

    Far more than a block's trip to a worker and back even on a busy machine (with 2 ms,
    a loaded CI machine's trips made reading here the faster choice, and the executor
    rightly took it)."""
    time.sleep(0.01)
    return x, os.getpid()


def read_all(stream: Any, state: Any = None) -> list[Any]:
    it = fn.iterate(stream, state)
    try:
        return list(it)
    finally:
        it.close()


def test_cheap_work_moves_from_worker_processes_to_the_consumer() -> None:
    n = 40_000
    got = read_all(fn.mp_prefetch(2, fn.from_dataset(fn.map(flip_with_pid, fn.range(n)))))
    assert [x for x, _, _ in got] == list(range(n))
    assert all(np.array_equal(image, np.flip(image_of(x), axis=1)) for x, image, _ in got)
    here = sum(pid == os.getpid() for _, _, pid in got)
    assert here > n // 2, f"{here} of {n} elements read in the consumer"
    assert got[0][2] == os.getpid(), "the consumer waited for the workers to start"
    assert_nothing_left()


def test_expensive_work_stays_in_worker_processes() -> None:
    n = 2_000  # past the first trial: reading here is measured, and loses
    got = read_all(fn.mp_prefetch(4, fn.from_dataset(fn.map(sleep_with_pid, fn.range(n)))))
    assert [x for x, _ in got] == list(range(n))
    here = sum(pid == os.getpid() for _, pid in got)
    # START_AFTER seconds of reading here before the workers start, and a few probes.
    assert 0 < here <= START_AFTER / 0.01 + n // 20, f"{here} of {n} elements read here"
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


def read_reader(reader: BlockReader) -> list[Any]:
    got: list[Any] = []
    while True:
        try:
            got += reader.read()[1]
        except StopIteration:
            return got


def test_after_a_block_fails_in_a_worker_the_work_stays_in_the_workers(tmp_path: Path) -> None:
    # Twice: a block read fails, and so does its position read alone (see `read_block`).
    fault = Fault(str(tmp_path), frozenset({3}), "raise", times=2)
    pipeline = fn.map(lambda x: (x, os.getpid()), fn.map(fault, fn.range(20_000)))
    pool = ready_pool(pipeline)
    reader = BlockReader(pipeline, 0, executor=LeafExecutor(pool, 0))
    reader.start_prefetch()  # the executor at once, not after START_AFTER seconds here
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


def sleepy_thread_of(x: int) -> tuple[int, str]:
    time.sleep(0.001)
    return x, threading.current_thread().name


def test_threads_read_waiting_work_and_never_cheap_work() -> None:
    cheap = read_all(fn.from_dataset(fn.map(thread_of, fn.range(50_000)), threads=8))
    assert [x for x, _ in cheap] == list(range(50_000))
    assert all(name == threading.current_thread().name for _, name in cheap)
    waiting = read_all(fn.from_dataset(fn.map(sleepy_thread_of, fn.range(600)), threads=8))
    assert [x for x, _ in waiting] == list(range(600))
    on_threads = sum(name.startswith("grainfn-read") for _, name in waiting)
    assert on_threads > 300, f"{on_threads} of 600 waiting reads on threads"
