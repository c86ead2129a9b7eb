"""A frozen worker never makes `next()` wait forever, when `worker_timeout` is set.

A worker that is SIGSTOPped (or stuck in an endless loop) sends nothing. With
`worker_timeout` set, the parent kills it after that many seconds and counts
it as dead: `next()` raises `WorkerError` naming it, the iterator stays after
the last element delivered, and reading on gives exactly the rest. Each test
stops a real worker with a real signal; none assumes how fast anything is:
the assertions are that the error comes, and what it and the data say.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.parallel.processes import WorkerError

from faults.harness import payload, read_through, reference_states
from support.leaks import assert_nothing_left, workers
from support.waiting import no_hang, wait_until

N = 300
AT = 57
TIMEOUT = 2.0  # seconds; the tests wait for the error, never for a time


def slow(x: int) -> int:
    """Work that takes a little time, so that blocks are still being read when a worker stops."""
    time.sleep(0.002)
    return x


def hangs_at_57(x: int) -> int:
    """Never returns at position 57: an endless loop in the pipeline's code."""
    while x == AT:
        time.sleep(0.01)
    return x


class Slow(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        return slow(element)


def prefetched(worker_timeout: float | None = TIMEOUT) -> Any:
    """An iterator over `fn.mp_prefetch` with 2 workers."""
    stream = fn.mp_prefetch(
        2, fn.batch(5, fn.from_dataset(fn.map(slow, fn.range(N)))), worker_timeout=worker_timeout
    )
    return grain.DatasetIterator.over(stream)


def loader(worker_timeout: float | None = TIMEOUT) -> Any:
    """A DataLoader with 2 workers, batching in the workers."""
    return grain.DataLoader(
        data_source=list(range(N)),
        sampler=grain.samplers.SequentialSampler(N),
        operations=[Slow(), grain.transforms.Batch(5)],
        worker_count=2,
        worker_timeout=worker_timeout,
    )


def facade(worker_timeout: float | None = TIMEOUT) -> Any:
    """`IterDataset.mp_prefetch` with the timeout in Grain's MultiprocessingOptions."""
    options = grain.MultiprocessingOptions(num_workers=2, worker_timeout=worker_timeout)
    return grain.MapDataset.range(N).map(slow).batch(5).to_iter_dataset().mp_prefetch(options)


FACES: dict[str, Callable[..., Any]] = {
    "mp_prefetch": prefetched,
    "DataLoader": loader,
    "IterDataset.mp_prefetch": facade,
}


@contextlib.contextmanager
def stopped(process: Any) -> Iterator[None]:
    """SIGSTOPs `process`; lets it go on (SIGCONT) afterwards if nobody killed it."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)


def index_of(process: Any) -> int:
    """The worker index in a worker process's name, `grainfn-worker-<index>`."""
    return int(process.name.rsplit("-", 1)[1])


def as_lists(elements: list[Any]) -> list[list[int]]:
    return [np.asarray(element).tolist() for element in elements]


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_a_stopped_worker_is_killed_after_worker_timeout_and_nothing_is_lost(face: str) -> None:
    make = FACES[face]
    expected = as_lists(list(make()))
    states = reference_states(make)
    it = iter(make())
    first = next(it)
    # Blocks go to the workers in turn, so worker 0 read the first: it has started (on a
    # busy machine the other may still be loading the pipeline) and holds the next block.
    victim = min(workers(), key=index_of)
    with stopped(victim), no_hang("the error for a stopped worker"):
        run = read_through(it, max_errors=5, catch=(WorkerError,))
    named = f"grainfn worker {index_of(victim)} (pid {victim.pid})"
    theirs = [str(error) for error in run.errors if named in str(error)]
    assert len(theirs) == 1, run.errors  # the stopped worker, once: its replacement reads on
    message = theirs[0]
    assert f"sending nothing for {TIMEOUT:g} s (worker_timeout={TIMEOUT:g})" in message
    assert "while reading positions [" in message
    assert "Nothing was lost" in message and "raise worker_timeout" in message
    assert "SIGSTOP" in message
    assert "kills grainfn workers" not in message  # one timeout blames no position
    # Any other error is a timeout too (a machine stalled for seconds), never a loss.
    assert all("worker_timeout" in str(error) for error in run.errors), run.errors
    assert as_lists([first, *run.elements]) == expected  # each element once, in order
    for delivered, state in zip(run.delivered_at_error, run.states, strict=True):
        assert payload(state) == payload(states[1 + delivered])
    wait_until(
        lambda: victim.pid not in [p.pid for p in workers()], "the stopped worker was reaped"
    )
    it.close()
    assert_nothing_left()


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_after_the_timeout_error_reading_on_gives_exactly_the_rest(face: str) -> None:
    make = FACES[face]
    expected = as_lists(list(make()))
    it = iter(make())
    head = [next(it) for _ in range(3)]
    with (
        stopped(workers()[0]),
        no_hang("the error for a stopped worker"),
        pytest.raises(WorkerError, match="worker_timeout"),
    ):
        while True:
            head.append(next(it))
    saved = it.get_state()
    assert as_lists(head) == expected[: len(head)]  # the elements before it, exactly
    assert as_lists(list(it)) == expected[len(head) :]  # the next next() reads the block again
    it.close()
    resumed = iter(make())  # the state after the error continues exactly, elsewhere too
    resumed.set_state(saved)
    assert as_lists(list(resumed)) == expected[len(head) :]
    resumed.close()
    assert_nothing_left()


@pytest.mark.slow
def test_a_position_that_never_returns_is_blamed_only_after_two_timeouts_there() -> None:
    """A block that hangs is read again one position at a time, twice (the two-deaths rule)."""
    stream = fn.mp_prefetch(
        2, fn.from_dataset(fn.map(hangs_at_57, fn.range(N))), worker_timeout=TIMEOUT
    )
    it = grain.DatasetIterator.over(stream)
    with no_hang("the error for a position that hangs"):
        run = read_through(it, max_errors=1, catch=(WorkerError,))
    message = str(run.errors[0])
    assert f"Reading position {AT} kills grainfn workers" in message, message
    assert "two in a row died at position 57" in message
    assert f"worker_timeout={TIMEOUT:g}" in message and "raise worker_timeout" in message
    assert run.elements == list(range(AT))  # every element before it, nothing after
    assert run.states[0]["state"] == {"kind": "DatasetPosition", "position": AT}
    it.close()
    assert_nothing_left()


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_close_reaps_a_stopped_worker_without_a_timeout(face: str) -> None:
    """The default waits for a stopped worker; close() still kills and reaps it."""
    it = iter(FACES[face](worker_timeout=None))
    it.start_prefetch()  # the workers now, in the background: none would for a while
    next(it)
    wait_until(lambda: len(workers()) == 2, "both workers started")
    victim = workers()[0]
    with stopped(victim):
        it.close()
        assert_nothing_left()
    assert victim.exitcode == -signal.SIGKILL


def test_the_timeout_changes_neither_the_elements_nor_the_states() -> None:
    def read(stream: Any) -> tuple[list[Any], Any]:
        with grain.DatasetIterator.over(stream) as it:
            head = [next(it) for _ in range(7)]
            return head, it.get_state()

    base = fn.batch(3, fn.from_dataset(fn.range(40)))
    without = read(fn.mp_prefetch(2, base))
    with_timeout = read(fn.mp_prefetch(2, base, worker_timeout=30))
    assert as_lists(with_timeout[0]) == as_lists(without[0])
    assert with_timeout[1] == without[1]  # the pipeline lines included
    assert with_timeout[1] == read(base)[1]  # mp_prefetch adds nothing to a state
    assert_nothing_left()


BAD_TIMEOUTS = [0, -1, 0.0, math.inf, -math.inf, math.nan, "5", True, [5]]


@pytest.mark.parametrize("bad", BAD_TIMEOUTS, ids=repr)
def test_a_bad_worker_timeout_is_refused_naming_it_and_what_is_allowed(bad: Any) -> None:
    allowed = "must be None (wait forever) or a finite number of seconds > 0, got "
    builders: dict[str, Callable[[], Any]] = {
        "worker_timeout": lambda: fn.mp_prefetch(2, fn.range(4), worker_timeout=bad),
        "MultiprocessingOptions.worker_timeout": lambda: grain.MultiprocessingOptions(
            num_workers=2, worker_timeout=bad
        ),
    }
    builders["worker_timeout "] = lambda: grain.DataLoader(
        data_source=[1, 2], sampler=grain.samplers.SequentialSampler(2), worker_timeout=bad
    )
    for name, build in builders.items():
        with pytest.raises((TypeError, ValueError)) as caught:
            build()
        assert f"{name.strip()} {allowed}{bad!r}" in str(caught.value)


@pytest.mark.parametrize("good", [None, 1, 0.5, 30.0, np.float32(2.5), np.int64(3)], ids=repr)
def test_a_good_worker_timeout_is_taken(good: Any) -> None:
    options = grain.MultiprocessingOptions(num_workers=2, worker_timeout=good)
    assert options.worker_timeout == good
    loader = grain.DataLoader(
        data_source=[1, 2],
        sampler=grain.samplers.SequentialSampler(2),
        worker_count=1,
        worker_timeout=good,
    )
    assert loader.multiprocessing_options.worker_timeout == good
    assert list(loader) == [1, 2]
    assert_nothing_left()


def million_workers_prefetched() -> Any:
    ds = grain.MapDataset.range(4).map(lambda x: x * 10).to_iter_dataset()
    return iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=10**6)))


def million_workers_loader() -> Any:
    return iter(
        grain.DataLoader(
            data_source=[0, 10, 20, 30],
            sampler=grain.samplers.SequentialSampler(4),
            worker_count=10**6,
        )
    )


@pytest.mark.parametrize("make", [million_workers_prefetched, million_workers_loader])
def test_a_million_workers_for_four_elements_start_a_handful_and_cost_nothing_each(
    make: Callable[[], Any],
) -> None:
    tracemalloc.start()
    try:
        with no_hang("four elements with a million workers"):
            it = make()
            got = list(it)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [0, 10, 20, 30]
    assert len(workers()) <= 4  # one per position at most, still running until close
    # Nothing is kept per worker that never starts: a million of anything would be
    # tens of megabytes at least (an empty deque alone is over 600 bytes).
    assert peak < 16 * 2**20, f"reading 4 elements with 10**6 workers peaked at {peak} bytes"
    it.close()
    assert_nothing_left()
