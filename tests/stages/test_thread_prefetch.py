"""thread_prefetch: the same elements and states as without it, errors in place, no thread left.

IteratorReadAhead, the same read-ahead over an iterator that is not a
pipeline's: its states are the iterator's own after each element returned.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Any

import pytest
from hypothesis import given, settings

from grainfn import fn, testing
from grainfn._src.core.stream import BaseCursor, PassThroughStream
from grainfn._src.stages.thread_prefetch import IteratorReadAhead

from support import conformance
from support.scripted import Scripted
from support.waiting import GENEROUS, wait_until


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "grainfn-thread-prefetch"]


@settings(max_examples=25, deadline=None)
@given(testing.streams())
def test_elements_and_states_are_the_streams_own(stream: Any) -> None:
    plain, ahead = fn.iterate(stream), fn.iterate(fn.thread_prefetch(3, stream))
    try:
        for _ in range(60):
            try:
                expected = next(plain)
            except StopIteration:
                with pytest.raises(StopIteration):
                    next(ahead)
                break
            testing.assert_elements_equal(next(ahead), expected)
            assert ahead.state == plain.state
        prefetched = fn.thread_prefetch(3, stream)
        assert fn.state_to_dict(prefetched, ahead.state) == fn.state_to_dict(stream, plain.state)
    finally:
        ahead.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_a_state_moves_between_pipelines_with_and_without_it() -> None:
    stream = fn.batch(3, fn.from_dataset(fn.shuffle(fn.range(50), seed=4)))
    ahead = fn.iterate(fn.thread_prefetch(4, stream))
    first = [next(ahead).tolist() for _ in range(5)]
    rest = [b.tolist() for b in fn.iterate(stream, ahead.state)]
    ahead.close()
    assert first + rest == [b.tolist() for b in fn.iterate(stream)]


class FailsOnce:
    def __init__(self, at: int) -> None:
        self.at, self.failed = at, False

    def __call__(self, x: int) -> int:
        if x == self.at and not self.failed:
            self.failed = True
            raise OSError(f"transient failure at {x}")
        return x


def assert_fails_in_place_then_reads_on(stream: fn.Stream, at: int, match: str) -> None:
    """`stream` over range(20) fails once after `at` elements: the error comes in place, at
    the state before it, and reading on gives the rest, nothing lost and nothing twice."""
    it = fn.iterate(fn.thread_prefetch(4, stream))
    seen = [next(it) for _ in range(at)]
    with pytest.raises(OSError, match=match):
        next(it)
    assert it.state == fn.DatasetPosition(at)
    seen += list(it)
    assert seen == list(range(20))
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_an_error_arrives_in_place_and_reading_goes_on_after_it() -> None:
    stream = fn.map(FailsOnce(7), fn.from_dataset(fn.range(20)))
    assert_fails_in_place_then_reads_on(stream, 7, "transient failure at 7")


def test_closing_stops_a_reader_blocked_on_a_full_queue() -> None:
    it = fn.iterate(fn.thread_prefetch(2, fn.from_dataset(fn.range(10**6))))
    next(it)
    cursor = it._cursor  # type: ignore[attr-defined]
    wait_until(lambda: cursor.items.full(), "the reader filled its queue")  # and waits
    assert len(prefetch_threads()) == 1
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_a_buffer_of_zero_reads_in_the_calling_thread() -> None:
    it = fn.iterate(fn.thread_prefetch(0, fn.from_dataset(fn.range(5))))
    assert list(it) == [0, 1, 2, 3, 4]
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 0"):
        fn.thread_prefetch(-1, fn.from_dataset(fn.range(5)))


@pytest.mark.grain
def test_thread_prefetch_iter_dataset_matches_grain() -> None:
    import grain

    import grainfn

    def build(lib: Any) -> Any:
        ds = lib.MapDataset.range(40).seed(1).shuffle().to_iter_dataset().batch(4)
        return lib.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=3)

    ours = [b.tolist() for b in build(grainfn)]
    assert ours == [b.tolist() for b in build(grain)]


def test_an_iterator_dropped_without_closing_stops_its_thread() -> None:
    it = fn.iterate(fn.thread_prefetch(2, fn.from_dataset(fn.range(1000))))
    next(it)
    assert len(prefetch_threads()) == 1
    del it
    wait_until(lambda: not prefetch_threads(), "the reader saw its stop flag and ended")


@dataclasses.dataclass(frozen=True, repr=False)
class StateFailsOnce(PassThroughStream):
    """The parent's elements; asking the state after element `at` fails once (a state that
    must be read again, as an elastic shard's, can fail as a read can)."""

    at: int
    failed: list[bool] = dataclasses.field(default_factory=list)

    def open(self, state: Any) -> Any:
        return _StateFailsOnceCursor(self.parent.open(state), self)

    def describe_stage(self) -> str:
        return f"state_fails_once({self.at})"


class _StateFailsOnceCursor(BaseCursor):
    def __init__(self, parent: Any, stage: StateFailsOnce) -> None:
        self.parent, self.stage = parent, stage

    def next(self) -> Any:
        return self.parent.next()

    def state(self) -> Any:
        state = self.parent.state()
        if state.position == self.stage.at + 1 and not self.stage.failed:
            self.stage.failed.append(True)
            raise OSError(f"state after {self.stage.at} unreadable just now")
        return state

    def children(self) -> tuple[Any, ...]:
        return (self.parent,)


def test_a_state_that_fails_in_the_reader_thread_is_raised_in_place() -> None:
    stream = StateFailsOnce(fn.from_dataset(fn.range(20)), 6)
    assert_fails_in_place_then_reads_on(stream, 6, "state after 6 unreadable")


class TimesOutFirst(queue.Queue):  # type: ignore[type-arg]
    """A queue whose first wait times out whatever it holds: the reader's last word comes
    just as the consumer's wait ends, and the reader is gone when the consumer looks."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.timed_out = False

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if timeout is not None and not self.timed_out:
            self.timed_out = True
            wait_until(lambda: self.qsize() >= 1, "the reader put its last word")
            for thread in prefetch_threads():
                thread.join(timeout=GENEROUS)
            raise queue.Empty
        return super().get(block, timeout)


def test_the_readers_last_word_is_read_even_when_the_wait_for_it_timed_out() -> None:
    stage = fn.thread_prefetch(4, fn.from_dataset(fn.range(0)))
    cursor = stage.open(stage.init())
    cursor.items = TimesOutFirst(4)  # type: ignore[attr-defined]
    with pytest.raises(StopIteration):  # not "the reader ended without a word"
        cursor.next()
    cursor.close()


class Blocks:
    """A map that blocks at element `at` until `release` is set (a 30 s network read)."""

    def __init__(self, at: int, entered: threading.Event, release: threading.Event) -> None:
        self.at, self.entered, self.release = at, entered, release

    def __call__(self, x: int) -> int:
        if x == self.at:
            self.entered.set()
            self.release.wait(GENEROUS)
        return x


def test_close_returns_while_the_reader_is_in_a_slow_read() -> None:
    entered, release = threading.Event(), threading.Event()
    stream = fn.map(Blocks(3, entered, release), fn.from_dataset(fn.range(10)))
    it = fn.iterate(fn.thread_prefetch(4, stream))
    assert next(it) == 0
    assert entered.wait(GENEROUS), "the reader never reached element 3"
    closing = threading.Thread(target=it.close)
    closing.start()
    closing.join(GENEROUS)
    closed_during_the_read = not closing.is_alive() and not release.is_set()
    release.set()  # the read returns: the reader sees the stop flag and ends
    assert closed_during_the_read
    assert it.state == fn.DatasetPosition(1)
    wait_until(lambda: not prefetch_threads(), "the reader ended after its read")


def test_an_iterators_state_is_its_own_after_the_element_returned() -> None:
    parent = Scripted([("value", v) for v in range(500)])
    it = IteratorReadAhead(parent, 50)
    for expected in range(20):
        assert next(it) == expected
        assert it.get_state() == {"position": expected + 1}
    wait_until(lambda: parent.position > 20, "the thread read ahead")
    assert it.get_state() == {"position": 20}
    it.set_state({"position": 100})
    assert parent.position == 100  # the thread stopped before the parent was set
    assert [next(it) for _ in range(3)] == [100, 101, 102]
    assert it.get_state() == {"position": 103}
    it.close()
    assert parent.closed
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")
    with pytest.raises(ValueError, match="closed"):
        next(it)


def test_a_state_that_the_iterator_changes_later_stays_as_it_was() -> None:
    class SharedState(Scripted):
        def __init__(self) -> None:
            super().__init__([("value", v) for v in range(10)])
            self.state = {"position": 0}

        def get_state(self) -> dict[str, int]:
            self.state["position"] = self.position  # the same dict, changed in place
            return self.state

    it = IteratorReadAhead(SharedState(), 4)
    next(it)
    first = it.get_state()
    next(it)
    assert first == {"position": 1}
    assert it.get_state() == {"position": 2}
    it.close()


def test_an_error_of_the_iterators_get_state_is_raised_by_get_state_only() -> None:
    class NoStateYet(Scripted):
        def get_state(self) -> dict[str, int]:
            raise NotImplementedError("no state in this iterator")

    it = IteratorReadAhead(NoStateYet([("value", 1)] * 3), 2)
    assert list(it) == [1, 1, 1]
    with pytest.raises(NotImplementedError, match="no state in this iterator"):
        it.get_state()
    it.close()


def test_closing_stops_the_reader_of_an_iterator_blocked_on_a_full_queue() -> None:
    parent = Scripted([("value", v) for v in range(10**5)])
    it = IteratorReadAhead(parent, 2)
    it.start_prefetch()
    # The reader fills its queue and waits: two in the queue, one waiting to go in.
    wait_until(lambda: parent.position == 3, "the reader read three elements ahead")
    assert len(prefetch_threads()) == 1
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")
    assert parent.closed
    it.close()  # twice is fine


def test_the_thread_ends_with_the_iterator_and_after_an_error_and_starts_again() -> None:
    parent = Scripted([("value", 1), ("error", 2), ("value", 3)])
    it = IteratorReadAhead(parent, 4)
    assert next(it) == 1
    with pytest.raises(OSError, match="bad record 2"):
        next(it)
    wait_until(lambda: not prefetch_threads(), "the thread that met the error ended")
    assert it.get_state() == {"position": 1}
    assert next(it) == 3  # reads the parent on from where the error left it, as Grain does
    with pytest.raises(StopIteration):
        next(it)
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")
    it.close()


def test_an_iterator_read_ahead_and_dropped_without_closing_stops_its_thread() -> None:
    parent = Scripted([("value", v) for v in range(10**5)])
    it = IteratorReadAhead(parent, 2)
    next(it)
    assert len(prefetch_threads()) == 1
    del it
    wait_until(lambda: not prefetch_threads(), "the reader saw its stop flag and ended")
    assert parent.position < 10  # the thread stopped reading, not ran to the end


def test_an_iterator_without_get_state_is_read_ahead_and_its_state_is_refused() -> None:
    it = IteratorReadAhead(iter([1, 2, 3]), 2, "This reader")
    assert next(it) == 1
    with pytest.raises(TypeError, match="This reader has no state to give: its parent, a list_"):
        it.get_state()
    with pytest.raises(TypeError, match="This reader cannot set a state: its parent, a list_"):
        it.set_state({"position": 0})
    assert list(it) == [2, 3]  # nothing lost to the refusals
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_an_iterator_read_ahead_by_none_is_read_in_the_calling_thread() -> None:
    parent = Scripted([("value", 1), ("error", 2), ("value", 3)])
    it = IteratorReadAhead(parent, 0)
    assert next(it) == 1
    assert not prefetch_threads()
    with pytest.raises(OSError, match="bad record 2"):
        next(it)
    assert it.get_state() == {"position": 1}  # the state before the error, as Grain's
    assert list(it) == [3]
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 0"):
        IteratorReadAhead(parent, -1)


test_conforms = conformance.conforms(
    conformance.Example(
        "thread_prefetch(2)", lambda: fn.thread_prefetch(2, conformance.numbers(5))
    ),
)
