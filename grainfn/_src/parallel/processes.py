"""Worker processes that read blocks of dataset positions, for `mp_prefetch` and `DataLoader`.

A `WorkerPool` holds the datasets to read (its "leaves") and `num_workers`
processes, forked from grainfn's own fork server without running the main
script (see `fork_server`).
Block `t` of the pool goes to worker `t % num_workers`, which starts with its
first block (no more workers run than blocks were given) unless the pool was
warmed up (`warm_up`: every worker starts at once while the reader reads in
its own thread; `ready` says when they have all loaded the pipeline), and
each worker answers its blocks in order over its own socket, so the parent always knows which
worker holds the block it waits for. Output never depends on the number of
workers: a block's elements depend only on its positions. The pipeline
reaches the workers by reference to its data (see `shipping`: its arrays in
one memory file all workers map, encoded once per pipeline), and blocks come
back as a pickle and one anonymous memory file (see `transfer`).

Faults never cost an element:
- A worker that dies (a signal, `os._exit`, the OOM killer) loses the blocks
  it had not answered. The parent starts a new worker in its place and sends
  them again, the first (the one it died on) *one position at a time*; what
  that read shows decides whether a position is blamed (see `deaths`): either
  the block's result is the positions before the one that kills workers and a
  `WorkerError` naming it, or a `WorkerError` alone, so that the reader stays
  at the block's first position and the next read continues.
- With `worker_timeout` set, a worker that sends nothing for that many
  seconds while the parent waits for it (it is stopped, or stuck) is killed,
  and counts as dead: the same rule reads its blocks again. Without it (None)
  the parent waits for as long as the worker lives.
- A worker ignores Ctrl-C (the parent handles it) and exits when the parent's
  end of its socket closes.
- A block that ends with a `WorkerError` stops every worker (`park`): a
  kept error must not keep processes alive. The next read starts new ones.
- Only the process that made a pool stops its workers: a child forked from
  the parent (`os.fork()`) that exits leaves them alone.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import multiprocessing
import multiprocessing.connection
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core.blocks import Result
from grainfn._src.core.dataset import Dataset
from grainfn._src.parallel.cores import available_cores
from grainfn._src.parallel.deaths import (
    TIMEOUT_HINT,
    Death,
    Retry,
    WorkerError,
    after_death,
    check_worker_timeout,
    not_theirs,
    of_leaf,
    timed_out,
)
from grainfn._src.parallel.fork_server import start_context, warm
from grainfn._src.parallel.lifecycle import Worker, how_it_died, kill, stop_workers
from grainfn._src.parallel.ring import RingReader
from grainfn._src.parallel.shipping import COPY_RATE, Shipped, ship
from grainfn._src.parallel.transfer import Channel, decode_block, sweep_dead_segments
from grainfn._src.parallel.worker import rebuild_error, worker_main


class WorkerPool:
    """`num_workers` processes reading blocks of the `leaves` datasets.

    Args:
        leaves: The datasets the workers read; tasks name one by its index.
        num_workers: The number of processes, >= 1.
        buffer_per_worker: The most blocks in flight per worker.
        worker_init_fn: Called as `worker_init_fn(worker_index, num_workers)`
            in each worker before it reads anything.
        worker_timeout: Seconds the parent waits for a worker's next answer
            before it kills the worker and counts it as dead; None waits for
            as long as the worker lives.
        start_method: How workers start (see `start_context`): None forks
            them from grainfn's fork server where there is one.
    """

    def __init__(
        self,
        leaves: Sequence[Dataset[Any]],
        num_workers: int,
        buffer_per_worker: int = 1,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        worker_timeout: float | None = None,
        start_method: str | None = None,
    ) -> None:
        self.leaves = tuple(leaves)
        self.num_workers = num_workers
        self.buffer_per_worker = buffer_per_worker
        self.worker_init_fn = worker_init_fn
        self.worker_timeout = check_worker_timeout(worker_timeout)
        self.start_method = start_method
        self.owner = os.getpid()
        self.workers: dict[int, Worker] = {}  # by index, each started with its first block
        self._started = False
        self._context: Any = None
        self._shipped: Shipped | None = None
        self._warm_up: list[_WarmUp] = []  # the thread that starts every worker, once started
        self._next_task = 0
        self._tasks: dict[int, tuple[int, int, int]] = {}  # sent, not answered: leaf, first, stop
        # Per started worker, its tasks in order: nothing per worker that never starts.
        self._expected: collections.defaultdict[int, collections.deque[int]] = (
            collections.defaultdict(collections.deque)
        )
        self._done: dict[int, Result] = {}
        self._cancelled: set[int] = set()
        self._retries: dict[int, Retry] = {}  # tasks re-sent a position at a time
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def processes(self) -> list[Any]:
        """The worker processes now running (a dead one is replaced when found)."""
        return [worker.process for worker in self.workers.values()]

    def start(self) -> None:
        """Readies the pool (once); each worker starts with its first block (see the module)."""
        if self._started:
            return
        if self._finalizer is not None:
            raise ValueError(
                "This worker pool is closed: it starts no more workers. Make a new iterator "
                "(from the last state if needed); its workers are its own."
            )
        self._check_owner()
        _sweep_once_per_process()
        self._context = start_context(self.start_method)
        self._shipped = ship((*self.leaves, self.worker_init_fn))
        self._finalizer = weakref.finalize(
            self, _stop_pool, self.owner, self.workers, self._warm_up
        )
        _pools.add(self)
        self._started = True

    def warm_up(self) -> None:
        """Starts getting every worker ready now, so that nobody waits for them (once).

        A thread writes the pipeline's memory file (once per pipeline) and,
        where the fork server is new, starts the first worker, which waits for
        it; `ready` starts the others (see `_WarmUp`).
        """
        self.start()
        if not self._warm_up and self._started:
            assert self._shipped is not None
            first = None
            if not warm(self.start_method):  # not a method of the pool: see _WarmUp
                first = functools.partial(
                    _start_worker, self._context, self._shipped, self.num_workers
                )
            self._warm_up.append(_WarmUp(self._shipped, first, self.workers))

    def ready(self) -> bool:
        """Whether the workers can take blocks without the reader waiting: never waits.

        Warms the pool up (see `warm_up`) if it is not; once the thread is
        done, starts the workers not started yet (no more than the leaves have
        positions), each in a few milliseconds. True once every worker has
        loaded the pipeline, or failed to start or load it (the failure is
        raised when its first block is sent or awaited).
        """
        self.warm_up()
        if not self._warm_up or self._warm_up[0].thread.is_alive():
            return False
        for index in range(self._workers_to_warm_up()):
            if index not in self.workers:
                try:
                    self.workers[index] = self._start_worker(index)
                except Exception:  # started again by its first block, which raises the error
                    return True
        return all(self._answered(index) for index in list(self.workers))

    def start_seconds(self) -> float:
        """About how long readying the workers costs: chiefly writing the pipeline's arrays.

        0 once written (the memory file lives as long as the pipeline: other
        iterators and epochs of it find it written).
        """
        self.start()
        return 0.0 if self._shipped is None else self._shipped.unwritten_bytes / COPY_RATE

    def _workers_to_warm_up(self) -> int:
        """Every worker, but never more than there are positions to read (a block each)."""
        return min(self.num_workers, sum(leaf.length for leaf in self.leaves))

    def _answered(self, index: int) -> bool:
        """Whether worker `index` said it is ready, or failed to start; reads what it said."""
        worker = self.workers[index]
        if worker.ready or worker.held is not None:
            return True
        try:
            if not worker.channel.poll():
                return not worker.process.is_alive()  # a dead one is replaced when awaited
            message = worker.channel.receive()
        except (EOFError, OSError):
            return True
        if message[0][0] == "ready":
            worker.became_ready(message[1])
        else:
            worker.held = message  # for `_receive`
        return True

    def submit(self, leaf: int, first: int, stop: int) -> PoolTask:
        """Sends positions `[first, stop)` of leaf `leaf` to the next worker in turn."""
        self.start()
        task = self._next_task
        self._next_task += 1
        self._tasks[task] = (leaf, first, stop)
        try:
            self._send(task)
        except BaseException:  # its worker could not start: the next read tries again
            del self._tasks[task]
            raise
        return PoolTask(self, task)

    def result(self, task: int) -> Result:
        """Waits for the block of `task`, keeping the blocks of other tasks that come first.

        A block that ends with a `WorkerError`, or a worker that could not
        start, stops every worker (`park`).
        """
        self._file_until(task, wait=True)
        block, error, seconds = self._done.pop(task)
        if isinstance(error, WorkerError):
            self.park()
        return block, error, seconds

    def done(self, task: int) -> bool:
        """Whether the block of `task` has come; never waits.

        Files what its worker has sent so far (as `result` does), and replaces
        the worker if it died; raises what `result` would raise then.
        """
        return self._file_until(task, wait=False)

    def _file_until(self, task: int, wait: bool) -> bool:
        """Files the messages of the worker of `task` until its block is in; whether it is.

        Without `wait`, only those already sent: it stops where the worker
        has sent nothing more. A failure to file one stops every worker.
        """
        self._check_owner()
        index = task % self.num_workers
        try:
            while task not in self._done:
                if not wait and not self._has_sent(index):
                    return False
                self._receive(index)
        except Exception:
            self.park()
            raise
        return True

    def _has_sent(self, index: int) -> bool:
        """Whether worker `index` has a message to file now, or died (filing that replaces it)."""
        worker = self.workers.get(index)
        if worker is None or worker.abandoned:
            return False
        return worker.held is not None or worker.channel.poll()

    def park(self) -> None:
        """Stops every worker now; the next block sent to or awaited from one starts it again.

        An error raised from a read holds, through its traceback, the
        iterator and its pool: a program that keeps errors (a retry loop, a
        list of failures) must not keep their processes too. The blocks the
        workers held are sent again, whole, to the workers that replace them
        (as after an interrupt: see `_receive`); nothing is lost.
        """
        if self._warm_up:  # the warm-up thread is the only other to start workers
            self._warm_up[0].thread.join()
        for worker in self.workers.values():
            worker.abandoned = True
            kill(worker.process)
            worker.close()  # its socket and ring too: a kept error holds no memory of it

    def cancel(self, task: int) -> None:
        """Drops the block of `task` when it arrives."""
        if self._done.pop(task, None) is None and task in self._tasks:
            self._cancelled.add(task)

    def close(self) -> None:
        """Stops the processes and frees the blocks nobody read; idempotent.

        In a forked child it only forgets the pool: the workers are its parent's.
        """
        if self._finalizer is not None:
            if os.getpid() == self.owner:
                self._finalizer()
            else:
                self._finalizer.detach()
        self._started = False  # a closed pool starts nothing more
        self._done.clear()

    def _check_owner(self) -> None:
        if os.getpid() != self.owner:
            raise WorkerError(
                f"These worker processes belong to process {self.owner}, and this is process "
                f"{os.getpid()} (a fork of it). Make a new iterator here; its workers will be "
                "this process's own."
            )

    def _start_worker(self, index: int) -> Worker:
        assert self._shipped is not None
        return _start_worker(self._context, self._shipped, self.num_workers, index)

    def _send(self, task: int, one_by_one: bool = False) -> None:
        if self._warm_up:  # the warm-up thread is the only other to start workers
            self._warm_up[0].thread.join()
        worker = task % self.num_workers
        if worker not in self.workers:
            self.workers[worker] = self._start_worker(worker)
        self._expected[worker].append(task)
        leaf, first, stop = self._tasks[task]
        # A dead worker cannot take it: that shows when its answer is awaited.
        with contextlib.suppress(OSError):
            self.workers[worker].channel.send((task, leaf, first, stop, one_by_one))

    def _receive(self, index: int) -> None:
        """Files the next message of worker `index`, or replaces it if it died or timed out."""
        worker = self.workers[index]
        if worker.abandoned:  # killed by the parent (see `park`): its blocks are sent again
            self._replace(index)
            return
        if worker.held is not None:  # read while checking it was ready (see `_answered`)
            held, worker.held = worker.held, None
            self._take(index, *held)
            return
        connection = worker.channel.connection
        waiting = [connection, worker.process.sentinel]
        ready = multiprocessing.connection.wait(waiting, timeout=self.worker_timeout)
        if not ready:  # nothing within worker_timeout: stopped or stuck, so it counts as dead
            assert self.worker_timeout is not None, "only a timeout ends a wait with nothing"
            kill(worker.process)
            self._replace(index, timed_out(self.worker_timeout), TIMEOUT_HINT)
            return
        message: Any = None
        descriptor = None
        try:
            if connection in ready:  # what it sent before it died, if it died
                with contextlib.suppress(EOFError, OSError):
                    message, descriptor = worker.channel.receive()
            if message is not None:
                self._take(index, message, descriptor)
        except BaseException:
            # Ctrl-C halfway through an answer, a descriptor the parent had no room
            # for, or a worker that could not start: its answers are lost or cut, so
            # it is killed, and replaced at the next wait for it.
            worker.abandoned = True
            worker.process.kill()
            raise
        if message is None:
            self._replace(index)

    def _take(self, index: int, message: Any, descriptor: int | None) -> None:
        """Files a message of worker `index`."""
        if message[0] == "ready":
            self.workers[index].became_ready(descriptor)
            return
        if message[0] == "init-error":
            raise rebuild_error(message[1], message[2], f"starting grainfn worker {index}")
        task, last, data, sizes, at, error, seconds = message
        expected = self._expected[index][0]
        assert task == expected, f"worker {index} answered task {task}, expected {expected}"
        block: list[Any] = []
        failure: Exception | None = None
        ring = self.workers[index].ring
        if task in self._cancelled:
            if descriptor is not None:
                os.close(descriptor)  # nobody will read it: no need to map it
            if at is not None and ring is not None:
                ring.free(at + sum(sizes))
        else:
            block, failure = _decoded(data, descriptor, sizes, index, at, ring)
            if error is not None:
                failure = rebuild_error(error[0], error[1], f"grainfn worker {index}")
        retry = self._retries.get(task)
        if retry is not None:
            retry.parts.extend(block)
            block = retry.parts
            if last and failure is None:  # read again without dying: the death was not theirs
                block, failure = [], WorkerError(not_theirs(retry))
        if not last:
            return
        self._expected[index].popleft()
        if task not in self._cancelled:
            self._done[task] = (block, failure, seconds)
        self._forget(task)

    def _forget(self, task: int) -> None:
        del self._tasks[task]
        self._cancelled.discard(task)
        self._retries.pop(task, None)

    def _replace(self, index: int, how: str | None = None, hint: str = "") -> None:
        """Starts a new worker in place of dead worker `index` and resends what it held.

        Args:
            index: The dead worker.
            how: How it ended, when the parent killed it; None reads its exit status.
            hint: What to do about how it ended ("" when unknown).
        """
        dead = self.workers[index]
        if how is None:
            how = how_it_died(dead.process)
        death = Death(index, dead.process.pid, how, dead.ready, hint)
        dead.close()
        lost = list(self._expected.pop(index, ()))
        self.workers[index] = self._start_worker(index)
        for task in lost:
            if task in self._cancelled:
                self._forget(task)
            elif dead.abandoned:  # not a death: the parent killed it (see _receive)
                self._retries.pop(task, None)
                self._send(task)
            elif task != lost[0]:
                self._send(task)
            else:
                self._retry(task, death)

    def _retry(self, task: int, death: Death) -> None:
        """Resends the task a worker died on one position at a time, or ends it with an error."""
        leaf, first, stop = self._tasks[task]
        where = of_leaf(leaf, len(self.leaves))
        decision = after_death(death, self._retries.get(task), first, stop, where)
        if isinstance(decision, Retry):
            self._retries[task] = decision
            self._send(task, one_by_one=True)
        else:
            parts, message = decision
            self._forget(task)
            self._done[task] = (parts, WorkerError(message), 0.0)


def _start_worker(context: Any, shipped: Shipped, count: int, index: int) -> Worker:
    """Starts worker `index` of `count` and sends it the pipeline (see `shipping`)."""
    ours, theirs = context.Pipe(duplex=True)
    process = context.Process(
        target=worker_main,
        args=(theirs, index, count),
        name=f"grainfn-worker-{index}",
        daemon=True,
    )
    try:
        process.start()
    except Exception as error:
        ours.close()
        raise WorkerError(f"Could not start grainfn worker {index}: {error}") from error
    finally:
        theirs.close()
    channel = Channel(ours)
    message, descriptor = shipped.message()
    with contextlib.suppress(OSError):  # a worker that died at once is found when awaited
        channel.send(message, descriptor)
    return Worker(process, channel)


class _WarmUp:
    """The thread that readies a pool's workers before their first block (`WorkerPool.warm_up`).

    It writes the pipeline's memory file and, given `first` (the fork server
    is new: its start takes a second, which nobody should wait for), starts
    worker 0 and files it in `workers` (the pool's). The other workers are
    started by `WorkerPool.ready` in the reader's thread, once this one is
    done: in a thread, each of the dozens of system calls a start makes would
    wait for the reader's thread to let go of the GIL (up to 5 ms each, when
    the reader computes), and a start of milliseconds would take tenths of a
    second. It holds what starting needs, not the pool, so that a pool
    dropped meanwhile is collected: the pool's finalizer then stops it
    (`stop`) before it stops the workers. Stopping never waits for a start
    under way: the worker it brings is killed by the thread itself.
    """

    def __init__(
        self,
        shipped: Shipped,
        first: Callable[[int], Worker] | None,
        workers: dict[int, Worker],
    ) -> None:
        self.shipped, self.first, self.workers = shipped, first, workers
        self.stopping = False
        # Re-entrant: the garbage collector may run the pool's finalizer in this very thread.
        self.lock = threading.RLock()
        self.thread = threading.Thread(target=self._run, name="grainfn-worker-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.shipped.memory_file()
        if self.first is None or self.stopping:
            return
        try:
            worker = self.first(0)
        except Exception:  # started again by its first block, which raises the error
            return
        with self.lock:
            if not self.stopping:
                self.workers[0] = worker
                return
        kill(worker.process)  # the pool was closed while this worker started
        worker.close()

    def stop(self) -> None:
        """Starts no more workers and files none; a start under way ends in the thread."""
        with self.lock:
            self.stopping = True


def _stop_pool(owner: int, workers: dict[int, Worker], warm_up: list[_WarmUp]) -> None:
    """A pool's finalizer: its warm-up thread, then its workers (only in process `owner`)."""
    if os.getpid() != owner:
        return
    for thread in warm_up:
        thread.stop()
    stop_workers(owner, workers)


_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
_swept_by = 0  # the process that swept /dev/shm


def _sweep_once_per_process() -> None:
    """Removes what older grainfn versions left in /dev/shm (see `sweep_dead_segments`)."""
    global _swept_by
    if _swept_by != os.getpid():
        _swept_by = os.getpid()
        sweep_dead_segments()


def _forget_parents_workers() -> None:
    """In a child just forked (`os.fork()`): the pools' workers are the parent's, not ours.

    Without this, the child's exit would stop them: multiprocessing's exit
    hook terminates every daemonic child process it knows, and the child
    inherited the parent's list of them.
    """
    for pool in list(_pools):
        if pool._finalizer is not None:
            pool._finalizer.detach()
        for process in pool.processes:
            multiprocessing.process._children.discard(process)  # type: ignore[attr-defined]
    _pools.clear()


os.register_at_fork(after_in_child=_forget_parents_workers)


def _decoded(
    data: bytes,
    descriptor: int | None,
    sizes: list[int],
    index: int,
    at: int | None,
    ring: RingReader | None,
) -> tuple[list[Any], Exception | None]:
    """A block as sent, or none and the error that unpickling it raised."""
    try:
        return decode_block(data, descriptor, sizes, at, ring), None
    except Exception as error:
        error.add_note(
            f"Raised unpickling a block that grainfn worker {index} sent: its elements must "
            "unpickle in this process (their classes importable here)."
        )
        return [], error


class PoolTask:
    """A block in flight in a WorkerPool."""

    def __init__(self, pool: WorkerPool, task: int) -> None:
        self.pool, self.task = pool, task

    def result(self) -> Result:
        return self.pool.result(self.task)

    def done(self) -> bool:
        """Whether the block has come (see `WorkerPool.done`)."""
        return self.pool.done(self.task)

    def cancel(self) -> bool:
        self.pool.cancel(self.task)
        return True


class LeafExecutor:
    """The executor of one leaf of a pool, for a BlockReader.

    `consumer_helps` where the pool has fewer workers than this process has
    cores: then a core is left for the consumer, and reading while it waits
    adds that core to the workers' (see `BlockReader`); with a worker on every
    core, it would only take theirs.
    """

    task_seconds = 0.01

    def __init__(self, pool: WorkerPool, leaf: int) -> None:
        self.pool, self.leaf = pool, leaf
        pool.start()  # the pipeline pickled (cheap, once per pipeline): an error is said at once
        # One block more per worker than its buffer: while a worker computes a
        # block, its next task is already waiting, so it never idles between them.
        self.max_tasks = pool.num_workers * (pool.buffer_per_worker + 1)
        self.consumer_helps = pool.num_workers < available_cores()

    def submit(self, first: int, stop: int) -> PoolTask:
        return self.pool.submit(self.leaf, first, stop)

    def ready(self) -> bool:
        """Whether the pool's workers are up (see `WorkerPool.ready`); starts them if not."""
        return self.pool.ready()

    def start_seconds(self) -> float:
        """About how long readying the workers costs (see `WorkerPool.start_seconds`)."""
        return self.pool.start_seconds()

    def close(self) -> None:
        """The pool belongs to the stage that made it; it closes the pool."""
