"""Tests for grainfn._src.parallel.worker: a worker's parts, run in this process."""

import multiprocessing
import pickle
import sys
import threading
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.validate import UserStopIterationError
from grainfn._src.parallel import worker
from grainfn._src.parallel.deaths import WorkerError
from grainfn._src.parallel.transfer import Channel

WHERE = ("grainfn worker 0 (pid 1)", "")


def interrupt_at_2(x: int) -> int:
    if x == 2:
        raise KeyboardInterrupt
    return x


def fail_at_3(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


def test_init_functions_that_raise_stop_iteration_or_keyboard_interrupt_are_errors() -> None:
    def stops(index: int, count: int) -> None:
        raise StopIteration

    def interrupts(index: int, count: int) -> None:
        raise KeyboardInterrupt

    seen: list[tuple[int, int]] = []
    worker._run_init(lambda i, n: seen.append((i, n)), 1, 4)
    assert seen == [(1, 4)]
    with pytest.raises(UserStopIterationError, match="worker_init_fn raised StopIteration in"):
        worker._run_init(stops, 0, 2)
    with pytest.raises(WorkerError, match="worker_init_fn raised KeyboardInterrupt in grainfn"):
        worker._run_init(interrupts, 0, 2)


def test_a_keyboard_interrupt_is_an_error_at_its_position_after_those_before_it() -> None:
    block, error = worker._read(fn.map(interrupt_at_2, fn.range(5)), 0, 5, WHERE)
    assert block == [0, 1]
    assert isinstance(error, WorkerError)
    assert "KeyboardInterrupt at position 2 in grainfn worker 0 (pid 1)" in str(error)
    assert isinstance(error.__cause__, KeyboardInterrupt)


def test_reading_a_block_gives_its_elements_or_the_first_error() -> None:
    assert worker._read(fn.range(10), 3, 6, WHERE) == ([3, 4, 5], None)
    block, error = worker._read_to_interrupt(fn.map(fail_at_3, fn.range(5)), 1, 5, WHERE)
    assert (block, str(error)) == ([1, 2], "three")


def test_an_answer_says_its_task_whether_it_is_the_last_and_its_failure() -> None:
    parent, child = multiprocessing.Pipe()
    sender, receiver = Channel(child), Channel(parent)
    try:
        sent = worker._answer(sender, 7, fn.range(10), 0, 4, 8, WHERE, None)
        assert sent == (True, False)  # more of task 7 to come
        (task, last, _, _, _, failure, seconds), _ = receiver.receive()
        assert (task, last, failure) == (7, False, None)
        assert seconds >= 0
        sent = worker._answer(sender, 7, fn.map(fail_at_3, fn.range(10)), 0, 4, 8, WHERE, None)
        assert sent == (True, True)  # a failure ends the task
        (_, last, _, _, _, failure, _), descriptor = receiver.receive()
        assert last and descriptor is None
        error = worker.rebuild_error(*failure, "grainfn worker 0 (pid 1)")
        assert isinstance(error, ValueError) and str(error) == "three"
        assert error.__notes__[0] == "Raised by the function of map(fail_at_3), reading position 3."
        assert error.__notes__[-1].startswith("Raised in grainfn worker 0 (pid 1); its traceback:")
    finally:
        sender.close()
        receiver.close()


def test_an_answer_to_a_closed_socket_reports_it_could_not_send() -> None:
    parent, child = multiprocessing.Pipe()
    Channel(parent).close()
    sender = Channel(child)
    assert worker._answer(sender, 1, fn.range(3), 0, 3, 3, WHERE, None) == (False, True)
    sender.close()


class UnpicklableError(Exception):
    def __init__(self, lock: Any) -> None:
        super().__init__("with a lock")
        self.lock = lock


def test_errors_that_do_not_pickle_travel_as_runtime_errors_naming_them() -> None:
    payload = worker.error_payload(UnpicklableError(threading.Lock()))
    error = pickle.loads(payload)
    assert type(error) is RuntimeError
    assert str(error) == "UnpicklableError: with a lock"
    assert type(pickle.loads(worker.error_payload(KeyError("k")))) is KeyError


def test_names_of_main_are_found_among_what_came_with_the_pipeline() -> None:
    class Point:
        __module__, __qualname__ = "__main__", "PointOfTheTest"

    assert worker.brought_from_main("PointOfTheTest") is Point
    assert worker.brought_from_main("NothingOfThatName") is None


def test_a_name_of_main_that_did_not_come_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py"])
    monkeypatch.setattr(worker, "_missing", set())
    message = r"no attribute 'Absent' in a grainfn worker, which does not run the main script"
    with pytest.raises(AttributeError, match=message + r" \(train\.py\)"):
        worker.find_in_main("Absent")
    assert "Absent" in worker._missing  # looked for once
    with pytest.raises(AttributeError, match="__dict_like__"):
        worker.find_in_main("__dict_like__")


def test_errors_about_names_of_main_get_a_note() -> None:
    error = pickle.PicklingError(
        "Can't pickle <class '__main__.Thing'>: not found as __main__.Thing"
    )
    worker._note_main_module(error)
    assert "grainfn workers do not run the main script" in error.__notes__[0]
    other = ValueError("unrelated")
    worker._note_main_module(other)
    assert not hasattr(other, "__notes__")
