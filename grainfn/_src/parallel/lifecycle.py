"""The life of a worker process seen from the parent: how it died, killing and stopping it.

Used by `WorkerPool` (see `processes`): stopping reads what a worker still
sends so that it never blocks, and frees the memory files nobody read.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from typing import Any

from grainfn._src.parallel.ring import RingReader
from grainfn._src.parallel.transfer import Channel

_JOIN_SECONDS = 2.0


_HINTS = {
    signal.SIGKILL: "the OOM killer (see dmesg) or another process may have sent it",
    signal.SIGSEGV: "a crash in native code",
    signal.SIGBUS: "a crash in native code, or a memory-mapped file that ran out of space",
    signal.SIGTERM: "another process asked it to stop",
}


class Worker:
    """One worker process, the parent's end of its socket and of its ring (see `ring`)."""

    def __init__(self, process: Any, channel: Channel) -> None:
        self.process, self.channel = process, channel
        self.ready = False  # it loaded the pipeline and ran worker_init_fn
        self.abandoned = False  # killed by the parent, its answers cut short (see _receive)
        self.held: tuple[Any, int | None] | None = None  # a message read early (see _answered)
        self.ring: RingReader | None = None  # comes with its "ready"

    def became_ready(self, ring: int | None) -> None:
        """Notes the worker's "ready", which brings its ring's memory file (or None)."""
        self.ready = True
        if ring is not None:
            self.ring = RingReader(ring)

    def close(self) -> None:
        """Closes the parent's ends: the socket, with the memory files still in it, and the ring."""
        self.channel.close()
        if self.ring is not None:
            self.ring.close()


def how_it_died(process: Any) -> str:
    process.join(timeout=_JOIN_SECONDS)
    code = process.exitcode
    if code is None:  # its socket closed, yet it runs: it cannot be used any more
        kill(process)
        return "stopped answering"
    if code >= 0:
        return f"exited with code {code} (os._exit or sys.exit in the pipeline's code?)"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "an unknown signal"
    hint = _HINTS.get(-code)
    return f"was killed by signal {-code} ({name}{'; ' + hint if hint else ''})"


def kill(process: Any) -> None:
    """Kills `process` (SIGKILL, which ends a stopped process too) and reaps it."""
    process.kill()
    process.join(timeout=_JOIN_SECONDS)


def stop_workers(owner: int, started: dict[int, Worker]) -> None:
    """Asks the workers to stop, frees the blocks nobody read, and reaps them all.

    Does nothing outside process `owner`: a forked child must not stop its parent's workers.
    """
    if os.getpid() != owner:
        return
    workers = list(started.values())
    for worker in workers:
        with contextlib.suppress(OSError):
            worker.channel.send(None)
    deadline = time.monotonic() + _JOIN_SECONDS
    alive = list(workers)
    while alive and time.monotonic() < deadline:
        for worker in list(alive):
            _drain(worker.channel)
            if not worker.process.is_alive():
                _drain(worker.channel)
                alive.remove(worker)
        if alive:
            multiprocessing.connection.wait(
                [w.channel.connection for w in alive] + [w.process.sentinel for w in alive],
                timeout=0.05,
            )
    for worker in alive:  # stuck, or stopped (SIGSTOP): it cannot stop by itself
        kill(worker.process)
    for worker in workers:
        worker.process.join(timeout=_JOIN_SECONDS)
        worker.close()


def _drain(channel: Channel) -> None:
    """Reads what a stopping worker sent, so that it is not blocked sending it."""
    try:
        while channel.poll():
            _, descriptor = channel.receive()
            if descriptor is not None:
                os.close(descriptor)
    except (EOFError, OSError):
        pass
