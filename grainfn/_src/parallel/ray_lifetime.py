"""How long a Ray that grainfn started lives: until the last `RayPool` using it lets go.

A pool uses the Ray this process is connected to, or starts one
(`ray.init`) where there is none. Two rules follow:

- A Ray the user started (or connected to) is the user's: grainfn never
  shuts it down.
- A Ray that grainfn started is shut down when the last pool that uses it
  closes or is garbage collected, never under a pool still in use. Each pool
  that uses it holds a `RayLease`, released by the pool's finalizer; the
  last release shuts Ray down.

Which Ray is which is told by the driver's session (its node and job ids),
so a Ray the user restarts after grainfn's was shut down is the user's.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Mapping
from typing import Any

_JAX_FORK_WARNING = r"os\.fork\(\) was called"
"""JAX's warning, raised in the parent at every fork once JAX has started its threads."""


@dataclasses.dataclass(eq=False)
class _Started:
    """A Ray that grainfn started in this process: which session, and how many pools hold it."""

    session: tuple[str, str]
    holders: int = 0


@dataclasses.dataclass(eq=False)
class _Registry:
    """The Ray that grainfn started in this process, while it runs."""

    started: _Started | None = None
    # Re-entrant: the garbage collector may run a pool's finalizer (a release) in a thread
    # that holds it already.
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)


_registry = _Registry()


@dataclasses.dataclass(eq=False)
class RayLease:
    """A pool's hold on the Ray that grainfn started: `release` lets go (once).

    It holds no reference to its pool, so that a pool's finalizer may hold it.
    """

    started: _Started
    released: bool = False

    def release(self) -> None:
        """Lets go of Ray; the last lease released shuts it down. Releasing again does nothing."""
        import ray

        with _registry.lock:
            if self.released:
                return
            self.released = True
            self.started.holders -= 1
            if self.started.holders > 0 or _registry.started is not self.started:
                return
            _registry.started = None
            if ray.is_initialized() and _session(ray) == self.started.session:
                ray.shutdown()


def connect(address: str | None, init_options: Mapping[str, Any]) -> RayLease | None:
    """Connects this process to Ray, starting it where it is not connected yet.

    Args:
        address: `ray.init`'s address, where this process is not connected.
        init_options: `ray.init`'s other options, likewise.

    Returns:
        A lease where the Ray is grainfn's (started now, or by another pool
        still holding it): release it when done. None where it is the user's.
    """
    import ray

    with _registry.lock:
        started = _registry.started
        if not ray.is_initialized():
            with warnings.catch_warnings():
                # Ray starts its local processes by fork and exec: JAX's warning that a fork
                # of its threads may deadlock does not apply to a child that execs at once.
                warnings.filterwarnings("ignore", _JAX_FORK_WARNING, RuntimeWarning)
                ray.init(address=address, **init_options)
            started = _registry.started = _Started(_session(ray))
        elif started is None or started.session != _session(ray):
            return None  # the user's Ray
        started.holders += 1
        return RayLease(started)


def _session(ray: Any) -> tuple[str, str]:
    """Which Ray this process is connected to: its driver's node id and job id."""
    context = ray.get_runtime_context()
    return str(context.get_node_id()), str(context.get_job_id())
