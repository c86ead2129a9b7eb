"""thread_prefetch: the same elements and states as without it, errors in place, no thread left."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings

from grainfn import fn, testing


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
    assert not prefetch_threads()


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


def test_an_error_arrives_in_place_and_reading_goes_on_after_it() -> None:
    stream = fn.thread_prefetch(4, fn.map(FailsOnce(7), fn.from_dataset(fn.range(20))))
    it = fn.iterate(stream)
    seen = [next(it) for _ in range(7)]
    with pytest.raises(OSError, match="transient failure at 7"):
        next(it)
    assert it.state == fn.DatasetPosition(7)
    seen += list(it)
    assert seen == list(range(20))  # nothing lost, nothing twice
    assert not prefetch_threads()


def test_closing_stops_a_reader_blocked_on_a_full_queue() -> None:
    it = fn.iterate(fn.thread_prefetch(2, fn.from_dataset(fn.range(10**6))))
    next(it)
    time.sleep(0.2)  # the reader fills its queue and waits
    assert len(prefetch_threads()) == 1
    it.close()
    assert not prefetch_threads()


def test_a_buffer_of_zero_reads_in_the_calling_thread() -> None:
    it = fn.iterate(fn.thread_prefetch(0, fn.from_dataset(fn.range(5))))
    assert list(it) == [0, 1, 2, 3, 4]
    assert not prefetch_threads()
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
    for _ in range(50):  # the reader sees the stop flag within a poll
        if not prefetch_threads():
            break
        time.sleep(0.05)
    assert not prefetch_threads()
