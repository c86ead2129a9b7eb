"""Worker processes that read blocks of dataset positions, for `mp_prefetch` and `DataLoader`.

A `WorkerPool` holds the datasets to read (its "leaves") and `num_workers`
processes, forked from a fork server (see `start_context`).
Block `t` of the pool goes to worker `t % num_workers`, and each worker answers
its blocks in order over its own pipe, so the parent always knows which
worker holds the block it waits for. Output never depends on the number of
workers: a block's elements depend only on its positions.

The elements of a block are pickled with protocol 5; their large buffers
(numpy arrays) travel through one shared-memory segment per block, which the
parent copies out and unlinks at once. A worker ignores Ctrl-C (the parent
handles it), exits when the parent's end of its pipe closes, and a worker that
dies is reported by the parent as soon as it waits for that worker.
"""

from __future__ import annotations

import _posixshmem
import collections
import contextlib
import itertools
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import resource_tracker, shared_memory
from typing import Any, NoReturn

import cloudpickle

from grainfn._src.dataset import Dataset
from grainfn._src.parallel.threads import Result, read_block

SEGMENT_PREFIX = "grainfn_"
INLINE_BYTES = 64 * 1024
"""Buffers smaller than this travel inside the pickle, not through shared memory."""
"""Shared-memory segments made by grainfn workers are named with this prefix."""

_JOIN_SECONDS = 2.0
_segment_numbers = itertools.count()


class WorkerError(RuntimeError):
    """A worker process died, or could not start."""


class WorkerPool:
    """`num_workers` processes reading blocks of the `leaves` datasets.

    Args:
        leaves: The datasets the workers read; tasks name one by its index.
        num_workers: The number of processes, >= 1.
        buffer_per_worker: The most blocks in flight per worker.
        worker_init_fn: Called as `worker_init_fn(worker_index, num_workers)`
            in each worker before it reads anything.
    """

    def __init__(
        self,
        leaves: Sequence[Dataset[Any]],
        num_workers: int,
        buffer_per_worker: int = 1,
        worker_init_fn: Callable[[int, int], Any] | None = None,
    ) -> None:
        self.leaves = tuple(leaves)
        self.num_workers = num_workers
        self.buffer_per_worker = buffer_per_worker
        self.worker_init_fn = worker_init_fn
        self.processes: list[Any] = []
        self.connections: list[multiprocessing.connection.Connection] = []
        self._next_task = 0
        self._expected: list[collections.deque[int]] = []  # per worker, tasks in order
        self._done: dict[int, Result] = {}
        self._cancelled: set[int] = set()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def start(self) -> None:
        """Starts the processes (once); they load the datasets while the parent goes on."""
        if self.processes:
            return
        if self._finalizer is not None:
            raise ValueError("This worker pool is closed.")
        context = start_context()
        try:
            payload = cloudpickle.dumps((self.leaves, self.worker_init_fn))
        except Exception as error:
            raise TypeError(
                f"Worker processes need the pipeline pickled, and it does not pickle: {error}. "
                "Open files and connections lazily (on first read), not when the source is built."
            ) from error
        for index in range(self.num_workers):
            ours, theirs = context.Pipe(duplex=True)
            process = context.Process(
                target=worker_main,
                args=(theirs, index, self.num_workers, payload),
                name=f"grainfn-worker-{index}",
                daemon=True,
            )
            process.start()
            theirs.close()
            self.processes.append(process)
            self.connections.append(ours)
            self._expected.append(collections.deque())
        self._finalizer = weakref.finalize(self, stop_workers, self.processes, self.connections)

    def submit(self, leaf: int, first: int, stop: int) -> PoolTask:
        """Sends positions `[first, stop)` of leaf `leaf` to the next worker in turn."""
        self.start()
        task = self._next_task
        self._next_task += 1
        worker = task % self.num_workers
        try:
            self.connections[worker].send((task, leaf, first, stop))
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._raise_dead(worker)
        self._expected[worker].append(task)
        return PoolTask(self, task)

    def result(self, task: int) -> Result:
        """Waits for the block of `task`, keeping the blocks of other tasks that come first."""
        worker = task % self.num_workers
        while task not in self._done:
            self._receive(worker)
        return self._done.pop(task)

    def cancel(self, task: int) -> None:
        """Drops the block of `task` when it arrives."""
        if self._done.pop(task, None) is None:
            self._cancelled.add(task)

    def close(self) -> None:
        """Stops the processes and unlinks every segment they sent; idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._done.clear()

    def _receive(self, worker: int) -> None:
        connection, process = self.connections[worker], self.processes[worker]
        ready = multiprocessing.connection.wait([connection, process.sentinel])
        if connection not in ready:
            self._raise_dead(worker)
        try:
            message = connection.recv()
        except (EOFError, ConnectionResetError, OSError):
            self._raise_dead(worker)
        if message[0] == "init-error":
            raise _rebuild_error(message[1], message[2], f"starting grainfn worker {worker}")
        task, data, segment, sizes, error, seconds = message
        expected = self._expected[worker].popleft()
        assert task == expected, f"worker {worker} answered task {task}, expected {expected}"
        if task in self._cancelled:
            self._cancelled.discard(task)
            unlink(segment)  # nobody will read it: no need to map it
            return
        block = decode(data, segment, sizes)
        failure = None
        if error is not None:
            failure = _rebuild_error(error[0], error[1], f"grainfn worker {worker}")
        self._done[task] = (block, failure, seconds)

    def _raise_dead(self, worker: int) -> NoReturn:
        process = self.processes[worker]
        process.join(timeout=1.0)
        code = process.exitcode
        killed = code is not None and code < 0
        how = f"was killed by signal {-code}" if killed else f"exited with code {code}"
        raise WorkerError(
            f"grainfn worker {worker} (pid {process.pid}) {how} while the parent waited for its "
            "block. It may have run out of memory (see dmesg) or crashed in native code."
        )


def start_context() -> Any:
    """How workers start: forked from a fork server where there is one, else spawned.

    Both are safe once JAX has started threads: the fork server is a fresh
    process that imports the main module and grainfn without running anything,
    and forks each worker from that clean state in milliseconds, where a
    spawned worker would import everything again.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    main = sys.modules.get("__main__")
    main_name = getattr(getattr(main, "__spec__", None), "name", None)
    preload = ["grainfn._src.parallel.fork_server", "__main__", "numpy", "grainfn"]
    if main_name and main_name != "__main__":
        preload.append(main_name)  # run with -m: preloading it imports what it imports
    context.set_forkserver_preload(preload)  # takes effect when the server starts
    return context


class PoolTask:
    """A block in flight in a WorkerPool."""

    def __init__(self, pool: WorkerPool, task: int) -> None:
        self.pool, self.task = pool, task

    def result(self) -> Result:
        return self.pool.result(self.task)

    def cancel(self) -> bool:
        self.pool.cancel(self.task)
        return True


class LeafExecutor:
    """The executor of one leaf of a pool, for a BlockReader."""

    task_seconds = 0.01

    def __init__(self, pool: WorkerPool, leaf: int) -> None:
        self.pool, self.leaf = pool, leaf
        # One block more per worker than its buffer: while a worker computes a
        # block, its next task is already waiting, so it never idles between them.
        self.max_tasks = pool.num_workers * (pool.buffer_per_worker + 1)

    def submit(self, first: int, stop: int) -> PoolTask:
        return self.pool.submit(self.leaf, first, stop)

    def close(self) -> None:
        """The pool belongs to the stage that made it; it closes the pool."""


def worker_main(
    connection: multiprocessing.connection.Connection, index: int, count: int, payload: bytes
) -> None:
    """A worker's loop: read the blocks the parent asks for until it says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        leaves, init = pickle.loads(payload)
        if init is not None:
            init(index, count)
    except Exception as error:
        connection.send(("init-error", _error_payload(error), traceback.format_exc()))
        return
    while True:
        try:
            task = connection.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if task is None:
            return
        number, leaf, first, stop = task
        started = time.perf_counter()
        block, read_error = read_block(leaves[leaf], first, stop)
        failure = None if read_error is None else (_error_payload(read_error), _format(read_error))
        try:
            data, segment, sizes = encode(block)
        except Exception as encode_error:  # an element that does not pickle
            data, segment, sizes = encode([])
            failure = (_error_payload(encode_error), _format(encode_error))
        seconds = time.perf_counter() - started  # blocks are sized by the time they cost
        try:
            connection.send((number, data, segment, sizes, failure, seconds))
        except (BrokenPipeError, OSError):
            unlink(segment)
            return


def encode(block: list[Any]) -> tuple[bytes, str | None, list[int]]:
    """Pickles `block`, moving its large buffers (numpy arrays) into one shared-memory segment.

    Buffers under `INLINE_BYTES` stay in the pickle: for them a segment costs
    more (creating, mapping and unlinking it) than the copy it saves.
    """
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < INLINE_BYTES:
            return True  # true: pickled in-band
        buffers.append(buffer)
        return False

    data = pickle.dumps(block, protocol=5, buffer_callback=out_of_band)
    if not buffers:
        return data, None, []
    views = [buffer.raw() for buffer in buffers]
    sizes = [view.nbytes for view in views]
    name = f"{SEGMENT_PREFIX}{os.getpid()}_{next(_segment_numbers)}"
    segment = shared_memory.SharedMemory(name=name, create=True, size=max(1, sum(sizes)))
    try:
        memory = segment.buf
        assert memory is not None
        offset = 0
        for view, size in zip(views, sizes):
            memory[offset : offset + size] = view
            offset += size
        del memory
    finally:
        segment.close()
    return data, name, sizes


def decode(data: bytes, segment: str | None, sizes: list[int]) -> list[Any]:
    """Unpickles a block from `encode`; its arrays are views of the segment, which is unlinked.

    The segment's name is removed at once; its memory stays mapped for as long
    as an array uses it, and is returned to the system when the last one goes.
    """
    if segment is None:
        return pickle.loads(data)
    mapping = _map_and_unlink(segment, sum(sizes))
    whole = memoryview(mapping)
    buffers, offset = [], 0
    for size in sizes:
        buffers.append(whole[offset : offset + size])
        offset += size
    return pickle.loads(data, buffers=buffers)


def _map_and_unlink(segment: str, size: int) -> mmap.mmap:
    name = "/" + segment
    descriptor = _posixshmem.shm_open(name, os.O_RDWR, mode=0o600)
    try:
        return mmap.mmap(descriptor, max(1, size))
    finally:
        os.close(descriptor)
        _posixshmem.shm_unlink(name)
        resource_tracker.unregister(name, "shared_memory")


def unlink(segment: str | None) -> None:
    """Removes a segment that will not be decoded."""
    if segment is None:
        return
    name = "/" + segment
    try:
        _posixshmem.shm_unlink(name)
    except FileNotFoundError:
        return
    resource_tracker.unregister(name, "shared_memory")


def stop_workers(
    processes: list[Any], connections: list[multiprocessing.connection.Connection]
) -> None:
    """Asks the workers to stop, unlinks the segments of blocks nobody read, and reaps them all."""
    for connection in connections:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            connection.send(None)
    deadline = time.monotonic() + _JOIN_SECONDS
    alive = list(zip(processes, connections))
    while alive and time.monotonic() < deadline:
        for process, connection in list(alive):
            _drain(connection)
            if not process.is_alive():
                _drain(connection)
                alive.remove((process, connection))
        if alive:
            multiprocessing.connection.wait(
                [c for _, c in alive] + [p.sentinel for p, _ in alive], timeout=0.05
            )
    for process, connection in alive:
        process.kill()
        process.join(timeout=_JOIN_SECONDS)
        _drain(connection)
    for process in processes:
        process.join(timeout=_JOIN_SECONDS)
    for connection in connections:
        connection.close()


def _drain(connection: multiprocessing.connection.Connection) -> None:
    try:
        while connection.poll():
            message = connection.recv()
            if message[0] != "init-error":
                unlink(message[2])
    except (EOFError, OSError):
        pass


def _error_payload(error: Exception) -> bytes:
    try:
        payload = cloudpickle.dumps(error)
        pickle.loads(payload)
        return payload
    except Exception:
        return cloudpickle.dumps(RuntimeError(f"{type(error).__qualname__}: {error}"))


def _format(error: Exception) -> str:
    return "".join(traceback.format_exception(error))


def _rebuild_error(payload: bytes, trace: str, where: str) -> Exception:
    error: Exception = pickle.loads(payload)
    error.add_note(f"Raised in {where}; its traceback:\n{trace.rstrip()}")
    return error
