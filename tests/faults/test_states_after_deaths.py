"""The state after a worker's death is known without the workers.

`get_state()` is what an Orbax save calls, often right after an error. It must
name the boundary after the last element delivered without reading anything
again through worker processes, which may be dying: it starts no process and
cannot fail with a `WorkerError`.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

import grainfn as grain
from grainfn._src.parallel.processes import WorkerError
from grainfn.testing import assert_elements_equal

from faults.faulty import Fault
from faults.harness import payload
from faults.test_worker_faults import AT, PIPELINES, N, NotMultipleOf5, fault_free
from support.leaks import assert_nothing_left, workers
from support.waiting import wait_until

BATCHED = ["mp_prefetch+filter+batch", "DataLoader+filter+batch"]
"""Pipelines whose stream stages (filter, batch) run above the workers: a failed read
leaves them inside a batch, so their state cannot simply be read off the reader."""


def kill_every_worker() -> None:
    for process in workers():
        os.kill(process.pid, signal.SIGKILL)
    wait_until(lambda: not workers(), "every worker is gone")


@pytest.mark.parametrize("name", BATCHED)
def test_get_state_after_a_worker_death_starts_no_worker(name: str, tmp_path: Path) -> None:
    make = PIPELINES[name]
    expected, states = fault_free(make, tmp_path)
    it = iter(make(Fault(str(tmp_path), frozenset({AT}), "sigkill", times=1)))
    delivered: list[Any] = []
    with pytest.raises(WorkerError):
        while True:
            delivered.append(next(it))
    kill_every_worker()  # whatever the pool had left
    state = it.get_state()
    assert not workers(), "get_state() started worker processes to find the state"
    assert payload(state) == payload(states[len(delivered)])
    assert_elements_equal(delivered + list(it), expected)  # reading on loses nothing
    it.close()
    assert_nothing_left()


class Slow(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        threading.Event().wait(0.002)
        return element


def loader_under_kills() -> Any:
    """The batch after a filter runs in the parent, above the workers."""
    return grain.DataLoader(
        data_source=list(range(4 * N)),
        sampler=grain.samplers.IndexSampler(4 * N, shuffle=True, seed=3, num_epochs=1),
        operations=[Slow(), NotMultipleOf5(), grain.transforms.Batch(4)],
        worker_count=2,
        adaptive=False,
    )


@pytest.mark.slow
def test_get_state_never_fails_while_workers_are_killed_again_and_again() -> None:
    """Eight kills, 0.2 to 1 s apart, and `get_state()` after every read, as a saving loop does."""
    reference = iter(loader_under_kills())
    expected, states = [], [reference.get_state()]
    for batch in reference:
        expected.append(batch)
        states.append(reference.get_state())
    reference.close()
    it = iter(loader_under_kills())
    stop = threading.Event()
    killed = []

    def kill_now_and_then() -> None:
        chance = random.Random(7)
        while len(killed) < 8 and not stop.wait(chance.uniform(0.2, 1.0)):
            alive = workers()
            if alive:
                os.kill(alive[0].pid, signal.SIGKILL)
                killed.append(alive[0].pid)

    killer = threading.Thread(target=kill_now_and_then, daemon=True)
    killer.start()
    elements: list[Any] = []
    errors = 0
    try:
        while True:
            try:
                elements.append(next(it))
            except StopIteration:
                break
            except WorkerError:
                errors += 1
            # Every state, after an element or an error, is the boundary after what was delivered.
            assert payload(it.get_state()) == payload(states[len(elements)])
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was killed: the run ended before the first kill"
    assert_elements_equal(elements, expected)
    it.close()
    assert_nothing_left()
