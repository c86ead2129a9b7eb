"""The worker side of a WorkerPool: how a worker process starts, and its loop.

A worker never runs the parent's main script (see `fork_server`): what the
pipeline needs of it came by value with the pipeline (cloudpickle; its
arrays by reference, see `shipping`). Only
pickling by *name* needs more: an element whose class the script defines is
pickled as `__main__.ClassName`, so a worker's `__main__` finds such names
among what the pipeline brought (`find_in_main`), and says what to do when
something is not there.

A worker loads the pipeline (and runs `worker_init_fn`), says it is ready,
then answers the blocks the parent asks for, in order, over its socket: each
block as one message, or, when the parent asks for a block one position at a
time (after a worker died on it), one message per position. It ignores
Ctrl-C (the parent handles it), so a KeyboardInterrupt in a worker comes from
the pipeline's code: it is sent as a `WorkerError` at its position, like an
exception there (see `deaths.interrupted`), not left to end the process. It
exits when the parent says stop or its end of the socket closes.
"""

from __future__ import annotations

import gc
import multiprocessing.connection
import os
import pickle
import signal
import sys
import time
import traceback
import types
from typing import Any

import cloudpickle

from grainfn._src.core.blocks import read_block
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.validate import UserStopIterationError
from grainfn._src.parallel.deaths import WorkerError, interrupted, of_leaf, worker_name
from grainfn._src.parallel.ring import Ring
from grainfn._src.parallel.shipping import load_message
from grainfn._src.parallel.transfer import HAS_MEMORY_FILES, Channel, encode_block


def worker_main(connection: multiprocessing.connection.Connection, index: int, count: int) -> None:
    """A worker's loop: read the blocks the parent asks for until it says stop or goes away.

    The parent's first message is the pipeline (see `shipping`): a small
    pickle, and the memory file of its large buffers, which the worker maps.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    vars(sys.modules["__main__"])["__getattr__"] = find_in_main  # the script's names, by need
    channel = Channel(connection)
    try:
        pipeline, descriptor = channel.receive()
    except (EOFError, OSError):
        return  # the parent is gone
    try:
        *leaves, init = load_message(pipeline, descriptor)
        del pipeline
        if init is not None:
            _run_init(init, index, count)
    except Exception as error:
        _note_main_module(error)
        channel.send(("init-error", error_payload(error), traceback.format_exc()))
        return
    ring = _make_ring()
    channel.send(("ready",), None if ring is None else ring.descriptor)
    if ring is not None:
        ring.handed_over()
    who = worker_name(index, os.getpid())
    while True:
        try:
            message, _ = channel.receive()
        except (EOFError, OSError):
            return  # the parent is gone
        if message is None:
            return
        task, leaf, first, stop, one_by_one = message
        step = 1 if one_by_one else stop - first
        where = (who, of_leaf(leaf, len(leaves)))
        for start in range(first, stop, step):
            sent, last = _answer(
                channel, task, leaves[leaf], start, start + step, stop, where, ring
            )
            if not sent:
                return  # the parent is gone
            if last:
                break


def _make_ring() -> Ring | None:
    """This worker's ring (see `ring`), or None where memory files cannot be made."""
    if not HAS_MEMORY_FILES:
        return None
    try:
        return Ring()
    except OSError:  # out of memory for it: blocks travel in memory files of their own
        return None


def _run_init(init: Any, index: int, count: int) -> None:
    """`init(index, count)`; a StopIteration or KeyboardInterrupt out of it is an error.

    A StopIteration passed on would end the data silently; a KeyboardInterrupt
    would end the worker as if it crashed (workers ignore Ctrl-C, so it came
    from the function).
    """
    try:
        init(index, count)
    except StopIteration as stop:
        raise UserStopIterationError(
            f"worker_init_fn raised StopIteration in grainfn worker {index}. Passed on, it "
            "would end the data silently with no element, so it is this error instead (the "
            "StopIteration is its __cause__). Return from worker_init_fn, or raise another "
            "exception to stop the run."
        ) from stop
    except KeyboardInterrupt as interrupt:
        raise WorkerError(
            f"worker_init_fn raised KeyboardInterrupt in grainfn worker {index}. Workers "
            "ignore Ctrl-C (the parent handles it), so it came from the function, not from a "
            "key press: it is this error, where a KeyboardInterrupt would stop the run as "
            "Ctrl-C does. Look in worker_init_fn for what raises it."
        ) from interrupt


def _answer(
    channel: Channel,
    task: int,
    dataset: Dataset[Any],
    first: int,
    stop: int,
    task_stop: int,
    where: tuple[str, str],
    ring: Ring | None,
) -> tuple[bool, bool]:
    """Reads positions `[first, stop)` of a task ending at `task_stop` and sends them.

    `where` is this worker and the dataset, as errors name them. Returns
    whether it could send them, and whether they were the task's last
    answer: they reached its end, or failed.
    """
    started = time.perf_counter()
    block, read_error = _read(dataset, first, stop, where)
    failure = None if read_error is None else (error_payload(read_error), _format(read_error))
    try:
        encoded = encode_block(block, ring=ring)
    except Exception as encode_error:  # an element that does not pickle
        _note_main_module(encode_error)
        encoded = encode_block([])
        failure = (error_payload(encode_error), _format(encode_error))
    seconds = time.perf_counter() - started  # blocks are sized by the time they cost
    last = failure is not None or stop >= task_stop
    try:
        channel.send(
            (task, last, encoded.data, encoded.sizes, encoded.at, failure, seconds),
            encoded.descriptor,
        )
    except OSError:
        return False, last
    finally:
        encoded.close()
    return True, last


def _read(
    dataset: Dataset[Any], first: int, stop: int, where: tuple[str, str]
) -> tuple[list[Any], Exception | None]:
    """`read_block`, where a KeyboardInterrupt is an error at the position that raised it."""
    try:
        return read_block(dataset, first, stop)
    except KeyboardInterrupt:
        pass  # read again one position at a time, outside this handler: no chained traceback
    return _read_to_interrupt(dataset, first, stop, where)


def _read_to_interrupt(
    dataset: Dataset[Any], first: int, stop: int, where: tuple[str, str]
) -> tuple[list[Any], Exception | None]:
    """Positions `[first, stop)` one at a time, up to the first that fails (see `_read`)."""
    block: list[Any] = []
    for position in range(first, stop):
        try:
            block.append(dataset._get(position))
        except KeyboardInterrupt as interrupt:
            error = interrupted(position, *where)
            error.__cause__ = interrupt  # its traceback goes with the error's (see `_format`)
            return block, error
        except Exception as error:
            return block, error
    return block, None  # the interrupt did not happen again


def find_in_main(name: str) -> Any:
    """A worker's `__main__.<name>`: what the parent's main script defines under `name`.

    Installed as the `__getattr__` of a worker's `__main__`, so called for a
    name `__main__` lacks, which is how pickle looks up `__main__.ClassName`.
    The worker never ran the script, but what the pipeline uses of it came with
    the pipeline: this finds it there (`brought_from_main`) and keeps it in
    `__main__` for the next lookup. A name not found stays missing (nothing
    of the script arrives after the pipeline), so it is looked for once.

    Raises:
        AttributeError: Nothing of that name came with the pipeline; the
            message says what to do.
    """
    found = None if _is_dunder(name) or name in _missing else brought_from_main(name)
    if found is None:
        _missing.add(name)
        script = sys.argv[0] if sys.argv else "?"
        raise AttributeError(
            f"module '__main__' has no attribute {name!r} in a grainfn worker, which does not "
            f"run the main script ({script}): only what the pipeline refers to comes with it. "
            "Refer to it from the pipeline's functions, or define it in a module that workers "
            "can import."
        )
    setattr(sys.modules["__main__"], name, found)
    return found


_missing: set[str] = set()  # names of __main__ looked for in vain


def brought_from_main(qualname: str) -> type | types.FunctionType | None:
    """The class or function of this process whose module is `__main__` and name `qualname`.

    In a worker these came with the pipeline (cloudpickle sends what the main
    script defines by value, keeping its module and name); None if none did.

    Example:
        >>> class Point:
        ...     __module__, __qualname__ = "__main__", "Point"
        >>> brought_from_main("Point") is Point
        True
        >>> brought_from_main("Elsewhere") is None
        True
    """
    for thing in gc.get_objects():
        kind = type(thing)  # not isinstance: that asks proxies for their __class__
        if kind is types.FunctionType or issubclass(kind, type):
            try:
                if thing.__module__ == "__main__" and thing.__qualname__ == qualname:
                    return thing
            except Exception:  # a metaclass's odd attribute: not one of the script's
                continue
    return None


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _note_main_module(error: Exception) -> None:
    """Adds what to do to an error about a name of `__main__`, which workers do not run."""
    message = str(error)
    if "__main__" in message and "does not run the main script" not in message:
        error.add_note(
            "grainfn workers do not run the main script, so their `__main__` holds only the "
            "functions and classes that came with the pipeline (cloudpickle). Something here "
            "is pickled by name from `__main__` (a `__reduce__` that returns a name, or a name "
            "the pipeline does not refer to): define it in a module that workers can import."
        )


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
