"""Reads in named threads (Grain's read threads): where each read runs, in what order, how often."""

from __future__ import annotations

import collections
import gc
import os
import pickle
import threading
import time
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.read_threads import NamedThreads

from support.waiting import wait_until


class Recorder:
    """A source that records each read: the index and the name of the thread it ran in."""

    def __init__(self, length: int, seconds: float = 0.0) -> None:
        self.length, self.seconds = length, seconds
        self.reads: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> int:
        if self.seconds:
            time.sleep(self.seconds)
        self.reads.append((index, threading.current_thread().name))
        return index * 2


def named(source: Any, threads: int) -> Any:
    return fn.from_dataset(fn.source(source), threads=threads, thread_name="reader")


def read_all(stream: Any, prefetch: bool = False) -> list[Any]:
    it = fn.iterate(stream)
    try:
        if prefetch:
            it.start_prefetch()
        return list(it)
    finally:
        it.close()


def where(x: int) -> tuple[int, str, int]:
    return x, threading.current_thread().name, os.getpid()


def test_named_threads_have_their_names_and_run_nested_reads_in_place() -> None:
    threads = NamedThreads("reader", 3)
    assert threads.names == ("reader_0", "reader_1", "reader_2")
    assert threads.run(lambda: threading.current_thread().name) == "reader_0"
    assert not threads.current()
    assert threads.run(threads.current)
    one = NamedThreads("solo", 1)  # a read inside its one thread runs there, not queued behind
    assert one.run(one.run, lambda: threading.current_thread().name) == "solo_0"


@pytest.mark.parametrize(
    ("prefix", "count", "message"),
    [("", 1, "non-empty str, got ''"), (7, 1, "non-empty str, got 7"), ("t", 0, "got 0")],
)
def test_a_bad_prefix_or_count_is_refused(prefix: Any, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NamedThreads(prefix, count)


def test_a_copy_makes_threads_of_its_own() -> None:
    threads = NamedThreads("reader", 1)
    copy = pickle.loads(pickle.dumps(threads))
    assert copy == threads and repr(copy) == "NamedThreads('reader', 1)"
    assert copy.run(threading.get_ident) != threads.run(threading.get_ident)
    assert copy.run(lambda: threading.current_thread().name) == "reader_0"
    assert not copy.run(threads.current)


def test_from_dataset_names_threads_only_with_threads() -> None:
    with pytest.raises(ValueError, match="threads named 'reader'_<n> only with threads >= 1"):
        fn.from_dataset(fn.range(3), threads=0, thread_name="reader")


def test_named_reading_is_the_same_pipeline_and_elements() -> None:
    data = fn.map(lambda x: x + 1, fn.range(50))
    plain, with_names = fn.from_dataset(data), fn.from_dataset(data, threads=2, thread_name="t")
    assert repr(with_names) == repr(plain)
    assert read_all(with_names) == read_all(plain) == list(range(1, 51))


def test_one_thread_reads_every_position_once_in_order() -> None:
    source = Recorder(300)
    assert read_all(named(source, 1)) == [2 * i for i in range(300)]
    assert source.reads == [(i, "reader_0") for i in range(300)]


def test_reading_ahead_in_one_thread_keeps_the_order_and_reads_each_position_once() -> None:
    source = Recorder(200, seconds=0.0002)
    it = fn.iterate(named(source, 1))
    it.start_prefetch()  # the thread reads ahead from the first element on
    got = list(it)
    reader = it._cursor.reader  # type: ignore[attr-defined]
    it.close()
    assert got == [2 * i for i in range(200)]
    assert reader.read_ahead == 200 and reader.read_here == 0
    assert source.reads == [(i, "reader_0") for i in range(200)]


def test_several_threads_read_each_position_once_under_their_names() -> None:
    # Cheap reads: the threads read ahead, lose their trial, and hand the work back to the
    # consumer's reads (still in the threads): no position is read twice on the way.
    source = Recorder(6000)
    assert read_all(named(source, 3), prefetch=True) == [2 * i for i in range(6000)]
    counts = collections.Counter(index for index, _ in source.reads)
    assert sorted(counts) == list(range(6000)) and set(counts.values()) == {1}
    assert {name for _, name in source.reads} <= {"reader_0", "reader_1", "reader_2"}


def test_an_error_in_a_named_thread_reaches_the_reader_and_the_read_is_retried() -> None:
    class Broken:
        broken = True

        def __len__(self) -> int:
            return 10

        def __getitem__(self, index: int) -> int:
            if index == 5 and self.broken:
                raise KeyError("record 5 is corrupt")
            return index

    source = Broken()
    it = fn.iterate(named(source, 1))
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(KeyError, match="record 5 is corrupt"):
        next(it)
    source.broken = False
    assert list(it) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("adaptive", [False, True])
def test_worker_processes_read_in_named_threads_of_their_own(adaptive: bool) -> None:
    stream = fn.from_dataset(fn.map(where, fn.range(400)), threads=2, thread_name="reader")
    got = read_all(fn.mp_prefetch(2, stream, adaptive=adaptive))
    assert [x for x, _, _ in got] == list(range(400))
    assert {name for _, name, _ in got} <= {"reader_0", "reader_1"}
    if not adaptive:  # every read in the workers
        assert os.getpid() not in {pid for _, _, pid in got}


def test_the_threads_end_with_their_stream() -> None:
    def readers() -> int:
        return sum(t.name.startswith("ending_") for t in threading.enumerate())

    stream = fn.from_dataset(fn.source(Recorder(100, 0.0002)), threads=4, thread_name="ending")
    read_all(stream, prefetch=True)
    assert readers() >= 1
    del stream
    gc.collect()
    wait_until(lambda: readers() == 0, "every ending_<n> thread ended")
