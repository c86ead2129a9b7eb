"""Tests for grainfn._src.parallel.deaths: what a worker's death means, decided without workers."""

import math

import pytest

from grainfn._src.parallel import deaths
from grainfn._src.parallel.deaths import Death, Retry, WorkerError, after_death


def test_a_death_names_the_worker_and_its_kind() -> None:
    death = Death(0, 12, "was killed by signal 9 (SIGKILL)", True)
    assert (death.who, death.kinds, death.short) == (
        "grainfn worker 0 (pid 12)",
        "grainfn workers",
        "workers",
    )
    assert deaths.worker_name(3, None) == "grainfn worker 3 (pid None)"
    assert deaths.of_leaf(1, 1) == ""
    assert deaths.of_leaf(1, 2) == " of dataset 1 of the pipeline"


def test_a_worker_dead_while_starting_ends_its_block_with_an_error_at_once() -> None:
    death = Death(2, 40, "exited with code 3", False, hint=" (a hint)")
    parts, message = after_death(death, None, 0, 8)
    assert parts == []
    assert message == (
        "grainfn worker 2 (pid 40) exited with code 3 while starting: it was loading the "
        "pipeline or running worker_init_fn. The next read starts new workers. (a hint)"
    )


def test_a_first_death_reads_the_block_again_one_position_at_a_time() -> None:
    death = Death(0, 12, "died", True, hint=" H")
    retry = after_death(death, None, 10, 20, where=" of dataset 1 of the pipeline")
    assert retry == Retry(
        "grainfn worker 0 (pid 12) died while reading positions [10, 20) of dataset 1 of the "
        "pipeline.",
        " H",
    )


def test_processes_read_again_from_the_first_position_and_blame_a_second_death_there() -> None:
    death = Death(0, 12, "died", True)
    retry = after_death(death, None, 10, 20)
    retry.parts.extend([10, 11])  # then a worker died at position 12
    again = after_death(death, retry, 10, 20)
    assert isinstance(again, Retry)
    assert (again.suspect, again.parts) == (12, [])  # started again at 10
    again.parts.extend([10, 11])
    parts, message = after_death(Death(1, 13, "died too", True), again, 10, 20)
    assert parts == [10, 11]
    assert message.startswith("Reading position 12 kills grainfn workers. grainfn worker 0")
    assert "two in a row died at position 12 (the last, pid 13, died too)" in message
    assert message.endswith(deaths._CRASH_HINT)


def test_a_death_at_another_position_is_a_new_suspect_not_a_culprit() -> None:
    death = Death(0, 12, "died", True, kind="Ray actor")
    retry = Retry("first", suspect=12, parts=[10, 11, 12])  # got past 12 this time
    again = after_death(death, retry, 10, 20, keep=True)
    assert isinstance(again, Retry)
    assert (again.suspect, again.parts, again.first_death) == (13, [10, 11, 12], "first")


def test_a_block_read_again_without_a_death_was_not_its_doing() -> None:
    message = deaths.not_theirs(Retry("grainfn worker 0 (pid 1) died.", hint=" H"))
    assert message.startswith("grainfn worker 0 (pid 1) died. A new worker read those positions")
    assert message.endswith("the next read starts again at the first of them. H")


@pytest.mark.parametrize("value", [30, 0.5, deaths.MAX_WORKER_TIMEOUT])
def test_worker_timeouts_are_seconds(value: float) -> None:
    assert deaths.check_worker_timeout(value) == float(value)
    assert deaths.check_worker_timeout(None) is None


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (True, TypeError, r"got True of type bool"),
        ("30", TypeError, r"got '30' of type str"),
        (0, ValueError, r"finite number of seconds > 0, got 0\."),
        (-1.5, ValueError, r"got -1\.5\."),
        (math.inf, ValueError, r"got inf\."),
        (math.nan, ValueError, r"got nan\."),
        (1e10, ValueError, r"must be at most 2147483 seconds"),
    ],
)
def test_bad_worker_timeouts_name_the_value_and_what_is_allowed(
    value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        deaths.check_worker_timeout(value, "worker_timeout")
    with pytest.raises(error, match=r"^read_timeout must be"):
        deaths.check_worker_timeout(value, "read_timeout")


def test_a_keyboard_interrupt_in_a_worker_is_an_error_at_its_position() -> None:
    error = deaths.interrupted(5, "grainfn worker 0 (pid 12)", " of dataset 2 of the pipeline")
    assert isinstance(error, WorkerError)
    assert str(error).startswith(
        "The pipeline's code raised KeyboardInterrupt at position 5 of dataset 2 of the "
        "pipeline in grainfn worker 0 (pid 12)."
    )
    assert deaths.timed_out(2.5) == (
        "was killed after sending nothing for 2.5 s (worker_timeout=2.5)"
    )
