"""Tests for grainfn._src.parallel.lifecycle: a worker's end seen from the parent, with stand-ins.

The processes here are stand-ins with what the parent reads of one (exit code,
join, kill, liveness); the channels are real socket pairs.
"""

import multiprocessing
import os
import signal
import weakref

import pytest

from grainfn._src.parallel import lifecycle
from grainfn._src.parallel.lifecycle import Worker
from grainfn._src.parallel.transfer import Channel


class StandIn:
    """What the parent reads of a worker process."""

    def __init__(self, exitcode: int | None, alive: bool = False) -> None:
        self.exitcode, self.alive = exitcode, alive
        self.killed = self.joined = 0
        self.sentinel = os.open(os.devnull, os.O_RDONLY)  # what `wait` watches besides sockets
        weakref.finalize(self, os.close, self.sentinel)

    def join(self, timeout: float | None = None) -> None:
        self.joined += 1

    def kill(self) -> None:
        self.killed += 1
        self.alive, self.exitcode = False, -signal.SIGKILL

    def is_alive(self) -> bool:
        return self.alive


@pytest.mark.parametrize(
    ("exitcode", "how"),
    [
        (3, "exited with code 3 (os._exit or sys.exit in the pipeline's code?)"),
        (0, "exited with code 0 (os._exit or sys.exit in the pipeline's code?)"),
        (-9, "was killed by signal 9 (SIGKILL; the OOM killer (see dmesg) or another process"),
        (-11, "was killed by signal 11 (SIGSEGV; a crash in native code)"),
        (-signal.SIGUSR1, f"was killed by signal {int(signal.SIGUSR1)} (SIGUSR1)"),
        (-200, "was killed by signal 200 (an unknown signal)"),
    ],
)
def test_how_it_died_reads_the_exit_code_and_names_the_signal(exitcode: int, how: str) -> None:
    assert lifecycle.how_it_died(StandIn(exitcode)).startswith(how)


def test_a_worker_that_runs_with_its_socket_closed_is_killed() -> None:
    process = StandIn(None, alive=True)
    assert lifecycle.how_it_died(process) == "stopped answering"
    assert process.killed == 1 and process.joined >= 2


def pair() -> tuple[Channel, Channel]:
    parent, child = multiprocessing.Pipe()
    return Channel(parent), Channel(child)


def test_stopping_asks_each_worker_frees_what_it_sent_and_closes_its_ends() -> None:
    ends = [pair() for _ in range(2)]
    reading, writing = os.pipe()
    os.close(writing)
    ends[0][1].send("a block nobody read", reading)  # a memory file still in the socket
    os.close(reading)
    workers = {i: Worker(StandIn(0), parent) for i, (parent, _) in enumerate(ends)}
    lifecycle.stop_workers(os.getpid(), workers)
    for _, child in ends:
        assert child.receive() == (None, None)  # the request to stop
        child.close()
    assert all(worker.process.joined >= 1 for worker in workers.values())
    assert all(worker.channel.connection.closed for worker in workers.values())
    assert all(worker.process.killed == 0 for worker in workers.values())


def test_stopping_kills_a_worker_that_does_not_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "_JOIN_SECONDS", 0.05)
    parent, child = pair()
    stuck = Worker(StandIn(None, alive=True), parent)
    lifecycle.stop_workers(os.getpid(), {0: stuck})
    assert stuck.process.killed == 1
    child.close()


def test_a_forked_child_does_not_stop_its_parents_workers() -> None:
    parent, child = pair()
    worker = Worker(StandIn(None, alive=True), parent)
    lifecycle.stop_workers(os.getpid() + 1, {0: worker})
    assert not parent.connection.closed
    assert not child.poll()
    parent.close()
    child.close()


def test_a_ready_worker_brings_its_ring() -> None:
    from grainfn._src.parallel.ring import Ring

    parent, child = pair()
    worker = Worker(StandIn(None), parent)
    worker.became_ready(None)
    assert worker.ready and worker.ring is None
    ring = Ring(size=64 + 16)
    worker.became_ready(os.dup(ring.descriptor))
    assert worker.ring is not None and worker.ring.capacity == 16
    worker.close()
    ring.close()
    child.close()
