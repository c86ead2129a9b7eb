"""Threaded reads: same elements and exact states; threads only when reading waits; no leaks."""

from __future__ import annotations

import gc
import itertools
import threading
import time
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.blocks import (
    MAX_READ_HERE,
    BlockReader,
    BlockSizer,
    ThreadExecutor,
    next_block_size,
)
from grainfn._src.core.executor_policy import reading_waits, threads_keep_up

from support.reading import read_reader
from support.scripted_clock import CostedExecutor, ScriptedClock, charged
from support.waiting import wait_until


class SleepySource:
    """A source whose reads wait, like a remote file; it can fail at one index."""

    def __init__(self, length: int, seconds: float = 0.0005, fail_at: int | None = None) -> None:
        self.length, self.seconds, self.fail_at = length, seconds, fail_at

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> int:
        time.sleep(self.seconds)
        if index == self.fail_at:
            raise KeyError(f"record {index} is corrupt")
        return index * 3


def reader_threads() -> int:
    return sum(t.name.startswith("grainfn-read") for t in threading.enumerate())


def wait_for_no_reader_threads() -> None:
    wait_until(lambda: reader_threads() == 0, "every grainfn-read thread ended")


def stream_of(source: Any, threads: int, buffer: int = 64) -> Any:
    return fn.filter(
        lambda x: x % 2 == 0, fn.from_dataset(fn.source(source), threads=threads, buffer=buffer)
    )


def test_waiting_reads_use_threads_and_give_the_same_elements_and_states() -> None:
    plain = list(fn.iterate(stream_of(SleepySource(300), threads=0)))
    it = fn.iterate(stream_of(SleepySource(300), threads=8))
    got, states = [], []
    for element in it:  # wherever each block is read: that is the policy's (below)
        got.append(element)
        states.append(it.state)
    assert got == plain
    wait_for_no_reader_threads()  # threads end once everything is read
    for k in (0, 7, 51, len(plain) - 1):
        rest = list(fn.iterate(stream_of(SleepySource(300), threads=0), states[k]))
        assert rest == plain[k + 1 :]


def test_reads_seen_to_wait_three_blocks_in_a_row_go_to_threads() -> None:
    clock = ScriptedClock()
    data = fn.map(lambda x: 3 * x, fn.range(300))
    pools: list[CostedExecutor] = []

    def threads() -> CostedExecutor:
        pools.append(CostedExecutor(ThreadExecutor(data, 8, 64), clock, 5e-5))
        return pools[-1]

    # Each element waits 0.5 ms here, computing nothing: blocks of 1, 2, 4 and 4 elements,
    # the first too short to judge (0.5 ms), the next three waiting.
    waiting = charged(data, clock, 5e-4, waits=True)
    reader = BlockReader(waiting, 0, 8, 64, clock=clock, thread_pool=threads)
    sizes, on_threads = [], []
    got: list[Any] = []
    for _ in range(4):
        got += reader.read()[1]
        sizes.append(len(got))
        on_threads.append(reader.reads_ahead)
    assert sizes == [1, 3, 7, 11] and on_threads == [False, False, False, True]
    while True:
        try:
            got += reader.read()[1]
        except StopIteration:
            break
    assert got == [3 * x for x in range(300)]
    [pool] = pools  # ten times less wait: the threads keep the work
    assert pool.blocks[0][0] == 11 and pool.blocks[-1][1] == 300
    wait_for_no_reader_threads()


def test_a_read_waits_when_its_thread_computes_less_than_a_quarter_of_its_time() -> None:
    assert reading_waits(cpu=0.0001, wall=0.001)  # a file, a network, a sleep
    assert not reading_waits(cpu=0.0009, wall=0.001)  # computing: threads would not help
    assert not reading_waits(cpu=0.0, wall=0.0004)  # too short to say


def test_cheap_reads_allowed_threads_give_the_same_elements() -> None:
    it = fn.iterate(fn.from_dataset(fn.map(lambda x: x + 1, fn.range(20_000)), threads=16))
    assert list(it) == list(range(1, 20_001))


def test_an_error_in_a_thread_surfaces_at_its_position() -> None:
    it = fn.iterate(fn.from_dataset(fn.source(SleepySource(200, fail_at=120)), threads=4))
    got = list(itertools.islice(it, 120))
    assert got == [3 * i for i in range(120)]
    with pytest.raises(KeyError, match="record 120 is corrupt"):
        next(it)
    assert it.state == fn.DatasetPosition(120)
    with pytest.raises(KeyError, match="record 120 is corrupt"):
        next(it)  # the failed position is tried again, nothing after it is skipped
    it.close()
    wait_for_no_reader_threads()


class FlakySource(SleepySource):
    """Fails the first two reads of one index, like a network error."""

    def __init__(self, length: int, flaky_at: int) -> None:
        super().__init__(length)
        self.flaky_at, self.failures = flaky_at, 0

    def __getitem__(self, index: int) -> int:
        if index == self.flaky_at and self.failures < 2:
            self.failures += 1
            raise ConnectionError(f"record {index} timed out")
        return super().__getitem__(index)


@pytest.mark.parametrize("threads", [0, 4])
def test_a_transient_error_can_be_retried_without_losing_elements(threads: int) -> None:
    it = fn.iterate(fn.from_dataset(fn.source(FlakySource(150, flaky_at=77)), threads=threads))
    # Threads from the first element: otherwise a busy machine can send the reader back to
    # its own thread after the threads read (and failed at) 77, and the re-read succeeds.
    it.start_prefetch()
    got = list(itertools.islice(it, 77))
    with pytest.raises(ConnectionError, match="record 77 timed out"):
        next(it)
    got += list(it)
    assert got == [3 * i for i in range(150)]


def test_start_prefetch_starts_threads_and_close_or_gc_stops_them() -> None:
    it = fn.iterate(fn.from_dataset(fn.source(SleepySource(10_000)), threads=3, buffer=30))
    it.start_prefetch()
    assert reader_threads() > 0
    assert next(it) == 0
    it.close()
    wait_for_no_reader_threads()
    it = fn.iterate(fn.from_dataset(fn.source(SleepySource(10_000)), threads=3, buffer=30))
    it.start_prefetch()
    next(it)
    del it
    gc.collect()
    wait_for_no_reader_threads()


def test_reads_ahead_stay_within_the_buffer() -> None:
    reader = BlockReader(fn.source(SleepySource(1000)), 0, threads=4, buffer=20)
    reader.start(seconds_per_element=0.0005)
    reader.read()
    assert reader.ahead <= 20 + reader.task_size
    reader.close()
    wait_for_no_reader_threads()


def test_repeat_closes_the_cursor_of_each_finished_epoch() -> None:
    stream = fn.repeat(3, fn.from_dataset(fn.source(SleepySource(40)), threads=2, buffer=8))
    assert list(fn.iterate(stream)) == [3 * i for i in range(40)] * 3
    gc.collect()
    wait_for_no_reader_threads()


def test_bad_thread_options_are_refused() -> None:
    with pytest.raises(ValueError, match="threads must be an integer >= 0, got -1"):
        fn.from_dataset(fn.range(3), threads=-1)
    with pytest.raises(ValueError, match="buffer must be a positive integer, got 0"):
        fn.from_dataset(fn.range(3), buffer=0)


def spin(x: int) -> int:
    total = 0
    for i in range(300):
        total += i * x
    return total


def test_threads_must_keep_the_consumer_waiting_much_less_than_reading_itself() -> None:
    assert threads_keep_up(waited_per_element=0.001, own_cost=0.0015)
    assert not threads_keep_up(waited_per_element=0.0011, own_cost=0.0015)
    assert threads_keep_up(waited_per_element=1.0, own_cost=0.0)  # nothing to compare with yet


def read_on_threads(here: float, ahead: float) -> tuple[list[Any], list[bool]]:
    """Reads `spin` over 4000 positions on real threads from the first block, reading here
    costing `here` seconds an element and the threads' blocks `ahead` (on a scripted clock);
    returns the elements and whether threads read after each block."""
    clock = ScriptedClock()
    data = fn.map(spin, fn.range(4000))

    def threads() -> CostedExecutor:
        return CostedExecutor(ThreadExecutor(data, 4, 64), clock, ahead)

    reader = BlockReader(charged(data, clock, here), 0, 4, 64, clock=clock, thread_pool=threads)
    got: list[Any] = list(reader.read()[1])  # reading here measured: `here`
    reader.start(seconds_per_element=here)
    on_threads = []
    while True:
        try:
            got += reader.read()[1]
        except StopIteration:
            return got, on_threads
        on_threads.append(reader.reads_ahead)


def test_threads_that_do_not_help_give_way_to_the_calling_thread() -> None:
    """A shared machine can make computing look like waiting; threads must then prove faster:
    here, the consumer waits 1.2 times less for them than reading itself, not 1.5."""
    got, on_threads = read_on_threads(here=1.2e-4, ahead=1e-4)
    assert on_threads[0] and not all(on_threads)
    assert got == [spin(x) for x in range(4000)]
    wait_for_no_reader_threads()


def test_threads_that_help_keep_reading() -> None:
    got, on_threads = read_on_threads(here=1e-3, ahead=1e-4)  # 10 times less wait: they win
    assert all(on_threads)
    assert got == [spin(x) for x in range(4000)]
    wait_for_no_reader_threads()


def test_the_next_block_grows_while_blocks_are_cheap_and_halves_when_slow() -> None:
    assert [next_block_size(8, s) for s in (0.00001, 0.0001, 0.001, 0.01, 0.03)] == [
        128,
        32,
        16,
        8,
        4,
    ]
    assert next_block_size(512, 0.0) == 1024 and next_block_size(1, 1.0) == 1


def test_a_block_sizer_reads_what_is_asked_at_once_and_grows_from_there() -> None:
    sizer = BlockSizer(limit=1024, clock=ScriptedClock())
    assert sizer.start() == 1
    sizer.done()  # a free block: the next one is 16 times as big
    assert sizer.start(at_least=100) == 100  # the caller needs 100 now
    sizer.done()
    assert sizer.start() == 1024  # grown from 100, up to the limit
    sizer.done(parts=10**9)  # a block read as many cheap parts stays at the limit
    assert sizer.start(at_least=5000) == 1024


def test_a_block_sizer_judges_each_part_of_a_block_read_in_parts() -> None:
    clock = ScriptedClock()
    sizer = BlockSizer(limit=1024, clock=clock)
    sizer.start(at_least=64)
    clock.advance(0.03)  # 30 ms for the whole block: slow for one part, cheap for 100 parts
    assert sizer.done(parts=100) == pytest.approx(0.0003)
    assert sizer.start() == 256
    sizer.done()
    sizer.size = 64
    sizer.start()
    clock.advance(0.03)
    sizer.done()  # one part of 30 ms: the next block halves
    assert sizer.start() == 32


# ---------------------------------------------------------------------------
# The consumer reads while it waits for an executor's block (`BlockReader._help`).


class LaneTask:
    """A block of a `Lane`: done once the clock passes the time its lane finishes it."""

    def __init__(self, lane: Lane, first: int, stop: int, ready_at: float) -> None:
        self.lane, self.first, self.stop, self.ready_at = lane, first, stop, ready_at

    def done(self) -> bool:
        return self.lane.clock.now() >= self.ready_at

    def result(self) -> tuple[list[int], None, float]:
        clock = self.lane.clock
        clock.advance(max(0.0, self.ready_at - clock.now()), 0.0)  # the consumer waits
        self.lane.taken.extend(range(self.first, self.stop))
        return list(range(self.first, self.stop)), None, self.lane.cost * (self.stop - self.first)

    def cancel(self) -> bool:
        return True


class Lane:
    """An executor of one worker that reads `cost` seconds an element, beside the consumer.

    Its blocks are read one after another from when each is sent, on the
    consumer's scripted clock, so the consumer's reads here and the lane's
    overlap as two processes' would.
    """

    task_seconds = 0.01
    consumer_helps = True  # it leaves the consumer a core

    def __init__(self, clock: ScriptedClock, cost: float, max_tasks: int = 2) -> None:
        self.clock, self.cost, self.max_tasks = clock, cost, max_tasks
        self.busy_until = 0.0
        self.taken: list[int] = []

    def submit(self, first: int, stop: int) -> LaneTask:
        self.busy_until = max(self.busy_until, self.clock.now()) + self.cost * (stop - first)
        return LaneTask(self, first, stop, self.busy_until)

    def close(self) -> None:
        pass


def lane_reader(
    n: int,
    here: float,
    ahead: float,
    adaptive: bool = True,
    fails_at: int | None = None,
    interrupted_at: int | None = None,
) -> tuple[BlockReader, Lane, ScriptedClock]:
    """A reader of `range(n)` over a `Lane`; reading position `fails_at` here fails twice
    (the block's read, then the position's alone), `interrupted_at` is Ctrl-C once."""
    clock = ScriptedClock()
    failed: list[int] = []

    def element(x: int) -> int:
        if x == fails_at and len(failed) < 2:
            failed.append(x)
            raise KeyError(f"record {x} is corrupt")
        if x == interrupted_at and not failed:
            failed.append(x)
            raise KeyboardInterrupt
        return x

    lane = Lane(clock, ahead)
    dataset = charged(fn.map(element, fn.range(n)), clock, here)
    reader = BlockReader(dataset, 0, executor=lane, adaptive=adaptive, buffer=None, clock=clock)
    reader.start_prefetch()  # the lane from the first block
    return reader, lane, clock


@pytest.mark.parametrize(("here", "ahead"), [(1e-4, 1e-4), (1e-4, 1e-3), (1e-3, 1e-4)])
def test_the_consumer_reads_while_it_waits_and_loses_or_repeats_nothing(
    here: float, ahead: float
) -> None:
    n = 20_000
    reader, lane, _ = lane_reader(n, here, ahead)
    assert read_reader(reader) == list(range(n))
    assert reader.read_here > 0 and reader.read_here + len(lane.taken) == n


def test_an_executor_as_fast_as_the_consumer_with_its_help_reads_in_about_half_the_time() -> None:
    n = 20_000
    helped, _, clock = lane_reader(n, 1e-4, 1e-4)
    assert read_reader(helped) == list(range(n))
    alone = n * 1e-4
    assert clock.now() < 0.6 * alone  # the lane and the consumer each read about half
    assert 0.4 * n < helped.read_here < 0.6 * n


@pytest.mark.parametrize("how", ["pinned", "on every core"])
def test_the_consumer_never_reads_ahead_of_a_pinned_executor_or_one_on_every_core(how: str) -> None:
    clock = ScriptedClock()
    lane = Lane(clock, 1e-4)
    adaptive = how == "on every core"
    lane.consumer_helps = not adaptive  # on every core: the consumer would take a worker's
    dataset = charged(fn.range(5_000), clock, 1e-4)
    reader = BlockReader(dataset, 0, executor=lane, adaptive=adaptive, buffer=None, clock=clock)
    reader.start_prefetch()
    got, ahead = read_watching(reader)
    assert got == list(range(5_000)) and ahead == [0]
    if not adaptive:  # not even a probe: every block is the executor's
        assert reader.read_here == 0 and lane.taken == list(range(5_000))


def read_watching(reader: BlockReader) -> tuple[list[Any], list[int]]:
    """Everything `reader` reads, and each count of blocks read here ahead it showed."""
    got: list[Any] = []
    seen = set()
    while True:
        seen.add(reader.read_here_ahead)
        try:
            got += reader.read()[1]
        except StopIteration:
            return got, sorted(seen)


def test_the_consumer_reads_at_most_max_read_here_blocks_ahead_of_the_executor() -> None:
    reader, _, _ = lane_reader(5_000, 1e-6, 1e-2)  # the lane far slower than reading here
    got, ahead = read_watching(reader)
    assert got == list(range(5_000))
    assert ahead == list(range(MAX_READ_HERE + 1))


def test_a_read_here_that_fails_raises_at_its_place_then_the_position_is_read_again() -> None:
    n = 5_000
    reader, lane, _ = lane_reader(n, 1e-4, 1e-4)
    read_reader(reader)
    helped = sorted(set(range(n)) - set(lane.taken))
    bad = helped[len(helped) // 2]  # read here while waiting, on the same scripted clock
    reader, lane, _ = lane_reader(n, 1e-4, 1e-4, fails_at=bad)
    got: list[Any] = []
    with pytest.raises(KeyError, match=f"record {bad} is corrupt"):
        while True:
            got += reader.read()[1]
    assert got == list(range(bad))
    assert got + read_reader(reader) == list(range(n))
    assert bad in lane.taken  # read again by the executor, the consumer's next block


def test_ctrl_c_while_reading_here_for_the_executor_loses_and_repeats_nothing() -> None:
    n = 5_000
    reader, lane, _ = lane_reader(n, 1e-4, 1e-4)
    read_reader(reader)
    helped = sorted(set(range(n)) - set(lane.taken))
    at = helped[len(helped) // 2]
    reader, lane, _ = lane_reader(n, 1e-4, 1e-4, interrupted_at=at)
    got: list[Any] = []
    with pytest.raises(KeyboardInterrupt):
        while True:
            got += reader.read()[1]
    assert got == list(range(len(got))) and len(got) < at
    assert got + read_reader(reader) == list(range(n))


def test_without_a_buffer_an_executor_keeps_all_its_tasks_in_flight() -> None:
    clock = ScriptedClock()
    lane = Lane(clock, 1e-6, max_tasks=4)  # cheap: tasks of the most positions, 1024
    for buffer, in_flight in ((None, 4), (500, 1)):
        reader = BlockReader(
            fn.range(100_000), 0, executor=lane, adaptive=False, buffer=buffer, clock=clock
        )
        reader.start_prefetch()
        for _ in range(8):  # past the first small blocks
            reader.read()
        assert reader.task_size == 1024
        assert [stop - first for first, stop, _ in reader.pending] == [1024] * in_flight
        reader.close()
