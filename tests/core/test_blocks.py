"""Threaded reads: same elements and exact states; threads only when reading waits; no leaks."""

from __future__ import annotations

import gc
import itertools
import threading
import time
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.blocks import BlockReader, BlockSizer, ThreadExecutor, next_block_size
from grainfn._src.core.executor_policy import reading_waits, threads_keep_up

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
