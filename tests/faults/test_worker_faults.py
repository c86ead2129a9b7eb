"""Faults in and around worker processes lose nothing, duplicate nothing and leave nothing behind.

Each pipeline reads 300 numbers through `mp_prefetch` or a `DataLoader` with 2
workers, once with their map failing at element 57 the first time only
(transient) and once every time (deterministic), by `os._exit`, SIGKILL or an
exception. A loop that catches the errors and reads on must get exactly the
fault-free sequence (transient) or exactly the elements before the failing
one, again and again (deterministic); `get_state()` after each error must be
the state after the last element delivered; and nothing may outlive `close()`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src.parallel.processes import WorkerError
from grainfn.testing import assert_elements_equal

from faults.faulty import HOWS, Fault, FaultError
from faults.harness import payload, read_through, reference_states
from support.leaks import assert_nothing_left, workers

N = 300
AT = 57
# adaptive=False: every read in the workers, where the faults are (read in this process
# while the workers start, a fault that kills would kill the test run).
TWO_WORKERS = grain.MultiprocessingOptions(num_workers=2, adaptive=False)


class FaultMap(grain.transforms.Map):
    def __init__(self, fault: Any) -> None:
        self.fault = fault

    def map(self, element: Any) -> Any:
        return self.fault(element)


class NotMultipleOf5(grain.transforms.Filter):
    def filter(self, element: Any) -> bool:
        return int(element) % 5 != 0


def prefetch_plain(fault: Any) -> Any:
    return grain.MapDataset.range(N).map(fault).to_iter_dataset().mp_prefetch(TWO_WORKERS)


def prefetch_batched(fault: Any) -> Any:
    """Stream stages (filter, batch) run in the parent, above the workers' reads."""
    ds = grain.MapDataset.range(N).shuffle(seed=5).map(fault).to_iter_dataset()
    return ds.filter(lambda x: x % 5 != 0).batch(4).mp_prefetch(TWO_WORKERS)


def loader_plain(fault: Any) -> Any:
    return grain.DataLoader(
        data_source=list(range(N)),
        sampler=grain.samplers.IndexSampler(N, shuffle=True, seed=3, num_epochs=1),
        operations=[FaultMap(fault)],
        worker_count=2,
        adaptive=False,
    )


def loader_batched(fault: Any) -> Any:
    """The batch after a filter runs in the parent, on the stream."""
    return grain.DataLoader(
        data_source=list(range(N)),
        sampler=grain.samplers.IndexSampler(N, shuffle=True, seed=3, num_epochs=1),
        operations=[FaultMap(fault), NotMultipleOf5(), grain.transforms.Batch(4)],
        worker_count=2,
        adaptive=False,
    )


PIPELINES = {
    "mp_prefetch": prefetch_plain,
    "mp_prefetch+filter+batch": prefetch_batched,
    "DataLoader": loader_plain,
    "DataLoader+filter+batch": loader_batched,
}


def clean(make: Callable[[Any], Any], tmp_path: Path) -> Callable[[], Any]:
    return lambda: make(Fault(str(tmp_path), frozenset(), "raise", 0))


def fault_free(make: Callable[[Any], Any], tmp_path: Path) -> tuple[list[Any], list[Any]]:
    """The elements of the pipeline without faults, and its state after each."""
    return list(clean(make, tmp_path)()), reference_states(clean(make, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("name", PIPELINES)
def test_a_transient_fault_loses_nothing(name: str, how: str, tmp_path: Path) -> None:
    make = PIPELINES[name]
    expected, states = fault_free(make, tmp_path)
    # A block that raises is read again one position at a time to find the
    # failing one, so an exception must happen twice to reach the consumer.
    times = 2 if how == "raise" else 1
    it = iter(make(Fault(str(tmp_path), frozenset({AT}), how, times=times)))
    run = read_through(it, max_errors=5, catch=(WorkerError, FaultError))
    assert len(run.errors) == 1, run.errors
    assert isinstance(run.errors[0], FaultError if how == "raise" else WorkerError)
    assert_elements_equal(run.elements, expected)  # the same elements, in the same order
    assert payload(run.states[0]) == payload(states[run.delivered_at_error[0]])
    run.assert_no_hang()
    it.close()
    assert_nothing_left()


@pytest.mark.slow
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("name", PIPELINES)
def test_a_deterministic_fault_raises_again_every_time(name: str, how: str, tmp_path: Path) -> None:
    make = PIPELINES[name]
    expected, states = fault_free(make, tmp_path)
    it = iter(make(Fault(str(tmp_path), frozenset({AT}), how, times=None)))
    run = read_through(it, max_errors=3, catch=(WorkerError, FaultError))
    assert len(run.errors) == 3
    kind = FaultError if how == "raise" else WorkerError
    assert all(isinstance(error, kind) for error in run.errors), run.errors
    if how != "raise":
        # The first death makes a new worker read the block one position at a
        # time; it dies again at the culprit, which the error names.
        culprit = f"Reading position {AT} " if name == "mp_prefetch" else "Reading position "
        assert all(culprit in str(e) and "kills grainfn workers" in str(e) for e in run.errors)
    delivered = run.delivered_at_error[0]
    assert run.delivered_at_error == [delivered] * 3  # nothing more, nothing less, each time
    assert_elements_equal(run.elements, expected[:delivered])
    assert all(AT not in np.asarray(e).ravel() for e in run.elements)
    for state in run.states:
        assert payload(state) == payload(states[delivered])
    run.assert_no_hang()
    it.close()
    assert_nothing_left()
    resumed = iter(clean(make, tmp_path)())  # the saved state continues exactly
    resumed.set_state(run.states[-1])
    assert_elements_equal(list(resumed), expected[delivered:])


class Slow(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        time.sleep(0.002)
        return element


@pytest.mark.slow
@pytest.mark.parametrize("face", ["mp_prefetch", "DataLoader"])
def test_a_worker_killed_from_outside_loses_nothing(face: str) -> None:
    if face == "mp_prefetch":
        ds = grain.MapDataset.range(N).map(Slow().map).to_iter_dataset().batch(5)
        make: Callable[[], Any] = lambda: ds.mp_prefetch(TWO_WORKERS)  # noqa: E731
    else:
        make = lambda: grain.DataLoader(  # noqa: E731
            data_source=list(range(N)),
            sampler=grain.samplers.SequentialSampler(N),
            operations=[Slow(), grain.transforms.Batch(5)],
            worker_count=2,
            adaptive=False,
        )
    expected = [b.tolist() for b in make()]
    it = iter(make())
    first = next(it)
    victim = workers()[0].pid
    killer = threading.Timer(0.05, os.kill, (victim, signal.SIGKILL))
    killer.start()
    run = read_through(it, max_errors=5, catch=(WorkerError,))
    killer.join()
    assert len(run.errors) == 1 and "killed by signal 9" in str(run.errors[0])
    assert [b.tolist() for b in [first, *run.elements]] == expected
    it.close()
    assert_nothing_left()


def built_only_in(pid: int) -> int:
    if os.getpid() != pid:
        raise ValueError(f"this element can only be built in process {pid}")
    return pid


class OnlyInItsWorker:
    """Pickles in the worker that made it; unpickling it anywhere else fails."""

    def __reduce__(self) -> Any:
        return built_only_in, (os.getpid(),)


def unpicklable_at_150(x: int) -> Any:
    return OnlyInItsWorker() if x == 150 else x


def test_a_block_that_does_not_unpickle_here_is_an_error_at_its_first_position() -> None:
    ds = grain.MapDataset.range(N).map(unpicklable_at_150).to_iter_dataset()
    it = iter(ds.mp_prefetch(TWO_WORKERS))
    run = read_through(it, max_errors=2, catch=(ValueError,))
    assert len(run.errors) == 2
    notes = "\n".join(run.errors[0].__notes__)
    assert "Raised unpickling a block that grainfn worker" in notes
    delivered = run.delivered_at_error[0]
    assert run.delivered_at_error == [delivered, delivered] and delivered <= 150
    assert run.elements == list(range(delivered))
    assert run.states[0]["state"] == {"kind": "DatasetPosition", "position": delivered}
    it.close()
    assert_nothing_left()


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_a_position_is_blamed_only_when_it_killed_twice(how: str, tmp_path: Path) -> None:
    """The first death is at 57 (the block's), the second at 58 (one at a time), once each,
    as a worker killed from outside would die: no position is to blame, nothing is lost."""
    fault = Fault(str(tmp_path), frozenset({AT, AT + 1}), how, times=1)
    it = iter(prefetch_plain(fault))
    run = read_through(it, max_errors=5, catch=(WorkerError,))
    assert not any("kills grainfn workers" in str(error) for error in run.errors), run.errors
    assert_elements_equal(run.elements, list(clean(prefetch_plain, tmp_path)()))
    it.close()
    assert_nothing_left()
