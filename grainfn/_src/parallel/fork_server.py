"""How grainfn starts its worker processes: without running the main module.

multiprocessing's `forkserver` and `spawn` children run the main script again
(as `__mp_main__`), so that what is pickled by name from it can be found
there: `spawn.get_preparation_data` puts the script's path or module name
under its `init_main_from_path` or `init_main_from_name` key, and
`spawn.prepare` in the child runs it; the process-wide fork server also
runs it itself when `__main__` is in its preload list (which recent Python
versions put there by default, and which works since the fix of CPython issue
126631). grainfn's workers need none of it: the pipeline travels
with cloudpickle, which carries what the main module defines by value. And
running the script again breaks any script with side effects at module level
(`jax.distributed.initialize()`, binding a port, writing a file) or without
an `if __name__ == "__main__":` guard. So grainfn starts its workers itself:

- forked from a fork server of its own (a `multiprocessing.forkserver.ForkServer`
  that is not the process-wide one `multiprocessing.set_forkserver_preload`
  configures), which preloads `PRELOAD` and never `__main__`;
- with the preparation data less its `init_main_*` keys (`preparation_data`),
  so that `spawn.prepare` leaves `__main__` alone;
- and spawned the same way where there is no fork server.

Everything else is multiprocessing's own (the Process, its Popen's waiting,
signalling and pickling of file descriptors, the server's protocol), and
nothing of multiprocessing's shared state changes: other code in the process
that uses multiprocessing sees what it saw before.
"""

from __future__ import annotations

import io
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
from multiprocessing import forkserver, reduction, spawn, util
from typing import Any

PRELOAD = ("numpy", "numpy.random", "cloudpickle", "grainfn", "grainfn._src.parallel.worker")
"""What grainfn's fork server imports once, so that each worker starts with it imported.

`numpy.random` too: grainfn imports it lazily (a program without random
stages never needs it), but every pipeline with a seed loads it in each
worker, about 16 ms of a worker's start on a 2-core machine."""

MAIN_KEYS_PREFIX = "init_main_"
"""Keys of multiprocessing's preparation data that make a child run the main module."""

HAS_FORK_SERVER = "forkserver" in multiprocessing.get_all_start_methods()


def preparation_data(name: str) -> dict[str, Any]:
    """What a new worker named `name` takes from this process: multiprocessing's, less `__main__`.

    The data is `multiprocessing.spawn.get_preparation_data(name)` (the
    process name, `sys.path`, `sys.argv`, the working directory, the authkey,
    logging) without the keys that make `spawn.prepare` run the main module
    in the child.

    Example:
        >>> data = preparation_data("grainfn-worker-0")
        >>> data["name"], data["sys_path"] == spawn.get_preparation_data("x")["sys_path"]
        ('grainfn-worker-0', True)
        >>> [key for key in data if key.startswith("init_main")]
        []
    """
    data = spawn.get_preparation_data(name)
    return {key: value for key, value in data.items() if not key.startswith(MAIN_KEYS_PREFIX)}


def start_context(method: str | None = None) -> Any:
    """The multiprocessing context grainfn starts its workers with (see the module).

    Args:
        method: "forkserver" (grainfn's own fork server) or "spawn"; None
            takes the fork server where the platform has one, else spawn.

    Returns:
        A context whose `Process` never runs the main module in the child;
        its `Pipe` and the rest are multiprocessing's.

    Raises:
        ValueError: `method` is neither, or the platform has no fork server.

    Example:
        >>> start_context().Process.__name__
        'ForkServerWorkerProcess'
        >>> start_context("fork")
        Traceback (most recent call last):
        ...
        ValueError: Unknown start method for grainfn workers: 'fork'; use 'forkserver' or 'spawn'.
    """
    if method is None:
        method = "forkserver" if HAS_FORK_SERVER else "spawn"
    if method not in ("forkserver", "spawn"):
        raise ValueError(
            f"Unknown start method for grainfn workers: {method!r}; use 'forkserver' or 'spawn'."
        )
    if method == "forkserver" and not HAS_FORK_SERVER:
        raise ValueError(
            "This platform has no fork server (multiprocessing.get_all_start_methods() is "
            f"{multiprocessing.get_all_start_methods()}); use 'spawn'."
        )
    return _CONTEXTS[method]


def _launch_data(popen: Any, process_obj: Any) -> io.BytesIO:
    """What a new process reads first: its preparation data, then its Process, both pickled.

    As multiprocessing's Popens write them, with `preparation_data` in place
    of `spawn.get_preparation_data`. `popen` is the spawning Popen while the
    Process pickles, so that its file descriptors go to the child.
    """
    data = io.BytesIO()
    multiprocessing.context.set_spawning_popen(popen)
    try:
        reduction.dump(preparation_data(process_obj._name), data)
        reduction.dump(process_obj, data)
    finally:
        multiprocessing.context.set_spawning_popen(None)
    return data


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class _Server:
    """grainfn's fork server, one per process: a child of `os.fork()` makes its own."""

    def __init__(self) -> None:
        self.server: Any = None
        self.owner = 0  # the process that made `server`
        self.forked = 0  # the process whose server forked a worker already (see `warm`)
        self.lock = threading.Lock()

    def get(self) -> Any:
        with self.lock:
            if self.owner != os.getpid():  # none yet, or the parent's (inherited by os.fork())
                server = forkserver.ForkServer()
                server.set_forkserver_preload(list(PRELOAD))
                self.server, self.owner = server, os.getpid()
            return self.server

    def after_fork(self) -> None:
        self.lock = threading.Lock()  # another thread may have held it at the fork


_SERVER = _Server()
os.register_at_fork(after_in_child=_SERVER.after_fork)


def warm(method: str | None = None) -> bool:
    """Whether starting a worker with `method` (see `start_context`) takes milliseconds.

    A spawned worker does: the parent only forks and execs. A fork server
    that has forked a worker does too; a new one first starts a Python
    process that imports `PRELOAD`, and the first start waits for it.
    """
    if method is None:
        method = "forkserver" if HAS_FORK_SERVER else "spawn"
    return method == "spawn" or _SERVER.forked == os.getpid()


_CONTEXTS: dict[str, Any] = {}

if HAS_FORK_SERVER:
    from multiprocessing import popen_forkserver

    class _ForkServerPopen(popen_forkserver.Popen):
        """multiprocessing's forkserver Popen, with grainfn's server and preparation data."""

        def _launch(self, process_obj: Any) -> None:
            data = _launch_data(self, process_obj)
            sentinel, write = _SERVER.get().connect_to_new_process(self._fds)  # type: ignore[attr-defined]
            self.sentinel = sentinel
            # A duplicate of the data pipe's write end: the child's sign that the parent lives.
            parent_write = os.dup(write)
            self.finalizer = util.Finalize(self, _close, (parent_write, sentinel))
            with open(write, "wb", closefd=True) as pipe:
                pipe.write(data.getbuffer())
            self.pid = forkserver.read_signed(sentinel)
            _SERVER.forked = os.getpid()

    class ForkServerWorkerProcess(multiprocessing.context.ForkServerProcess):
        """A Process forked from grainfn's fork server, without the main module."""

        @staticmethod
        def _Popen(process_obj: Any) -> Any:  # noqa: N802 (multiprocessing's name)
            return _ForkServerPopen(process_obj)

    class _ForkServerContext(multiprocessing.context.ForkServerContext):
        Process = ForkServerWorkerProcess

    _CONTEXTS["forkserver"] = _ForkServerContext()

if sys.platform != "win32":
    from multiprocessing import popen_spawn_posix, resource_tracker

    class _SpawnPopen(popen_spawn_posix.Popen):
        """multiprocessing's spawn Popen, with grainfn's preparation data."""

        def _launch(self, process_obj: Any) -> None:
            fds: list[int] = self._fds  # type: ignore[attr-defined]
            tracker = resource_tracker.getfd()
            assert tracker is not None, "getfd() starts the resource tracker"
            fds.append(tracker)
            data = _launch_data(self, process_obj)
            parent_read = child_write = child_read = parent_write = None
            try:
                parent_read, child_write = os.pipe()
                child_read, parent_write = os.pipe()
                command = spawn.get_command_line(tracker_fd=tracker, pipe_handle=child_read)
                fds.extend([child_read, child_write])
                executable: Any = spawn.get_executable()  # bytes, whatever typeshed says
                self.pid = util.spawnv_passfds(executable, command, fds)
                self.sentinel = parent_read
                with open(parent_write, "wb", closefd=False) as pipe:
                    pipe.write(data.getbuffer())
            finally:
                ours = tuple(fd for fd in (parent_read, parent_write) if fd is not None)
                self.finalizer = util.Finalize(self, _close, ours)
                for fd in (child_read, child_write):
                    if fd is not None:
                        os.close(fd)

    class SpawnWorkerProcess(multiprocessing.context.SpawnProcess):
        """A spawned Process that does not run the main module."""

        @staticmethod
        def _Popen(process_obj: Any) -> Any:  # noqa: N802 (multiprocessing's name)
            return _SpawnPopen(process_obj)

    class _SpawnContext(multiprocessing.context.SpawnContext):
        Process = SpawnWorkerProcess

    _CONTEXTS["spawn"] = _SpawnContext()
