"""The worker side of a WorkerPool: how a worker process starts, and its loop.

A worker loads the pipeline (and runs `worker_init_fn`), says it is ready,
then answers the blocks the parent asks for, in order, over its socket: each
block as one message, or, when the parent asks for a block one position at a
time (after a worker died on it), one message per position. It ignores
Ctrl-C (the parent handles it) and exits when the parent says stop or its end
of the socket closes.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import signal
import sys
import time
import traceback
from typing import Any

import cloudpickle

from grainfn._src.core.blocks import read_block
from grainfn._src.core.dataset import Dataset
from grainfn._src.parallel.transfer import Channel, encode


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


def worker_main(
    connection: multiprocessing.connection.Connection, index: int, count: int, payload: bytes
) -> None:
    """A worker's loop: read the blocks the parent asks for until it says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = Channel(connection)
    try:
        leaves, init = pickle.loads(payload)
        if init is not None:
            init(index, count)
    except Exception as error:
        channel.send(("init-error", error_payload(error), traceback.format_exc()))
        return
    channel.send(("ready",))
    while True:
        try:
            message, _ = channel.receive()
        except (EOFError, OSError):
            return  # the parent is gone
        if message is None:
            return
        task, leaf, first, stop, one_by_one = message
        step = 1 if one_by_one else stop - first
        for start in range(first, stop, step):
            sent, last = _answer(channel, task, leaves[leaf], start, start + step, stop)
            if not sent:
                return  # the parent is gone
            if last:
                break


def _answer(
    channel: Channel, task: int, dataset: Dataset[Any], first: int, stop: int, task_stop: int
) -> tuple[bool, bool]:
    """Reads positions `[first, stop)` of a task ending at `task_stop` and sends them.

    Returns whether it could send them, and whether they were the task's last
    answer: they reached its end, or failed.
    """
    started = time.perf_counter()
    block, read_error = read_block(dataset, first, stop)
    failure = None if read_error is None else (error_payload(read_error), _format(read_error))
    try:
        encoded = encode(block)
    except Exception as encode_error:  # an element that does not pickle
        encoded = encode([])
        failure = (error_payload(encode_error), _format(encode_error))
    seconds = time.perf_counter() - started  # blocks are sized by the time they cost
    last = failure is not None or stop >= task_stop
    try:
        channel.send(
            (task, last, encoded.data, encoded.sizes, failure, seconds), encoded.descriptor
        )
    except OSError:
        return False, last
    finally:
        encoded.close()
    return True, last


def error_payload(error: Exception) -> bytes:
    try:
        payload = cloudpickle.dumps(error)
        pickle.loads(payload)
        return payload
    except Exception:
        return cloudpickle.dumps(RuntimeError(f"{type(error).__qualname__}: {error}"))


def _format(error: Exception) -> str:
    return "".join(traceback.format_exception(error))


def rebuild_error(payload: bytes, trace: str, where: str) -> Exception:
    error: Exception = pickle.loads(payload)
    error.add_note(f"Raised in {where}; its traceback:\n{trace.rstrip()}")
    return error
