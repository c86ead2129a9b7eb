"""The demo runner's plan, option checks, progress bars and comparison of runs."""

from __future__ import annotations

import time

import pytest

from grainfn._src.demo.runner import Plan, StepBar, _first_difference, check_options, compare
from grainfn._src.demo.train import Log, Step


def test_plans_always_leave_steps_lost_and_steps_to_resume() -> None:
    for steps in range(4, 200):
        plan = Plan.of(steps)
        assert 0 < plan.checkpoint_step < plan.kill_step < plan.steps


def test_first_difference() -> None:
    assert _first_difference("abc", "abc") is None
    assert _first_difference("abc", "abd") == 3
    assert _first_difference("ab", "abc") == 3
    assert _first_difference("", "") is None


def test_compare_reports_every_kind_of_difference() -> None:
    def log(digests: str) -> Log:
        return Log("x", [Step(i + 1, d, 0.0, 0.0, 0.0) for i, d in enumerate(digests)])

    plan = Plan.of(6)  # checkpoint 3, kill 4
    reference = log("abcdef")
    good = compare(plan, reference, log("abcd"), 3, log("def"))
    assert all(ok for ok, _ in good), good
    killed_differs = compare(plan, reference, log("abXd"), 3, log("def"))
    assert killed_differs[0] == (
        False,
        "The killed run's batch at step 3 differs from the reference run's.",
    )
    wrong_step = compare(plan, reference, log("abcd"), 2, log("cdef"))
    assert wrong_step[1] == (False, "The latest checkpoint is step 2, not step 3.")
    assert wrong_step[2][0]  # the batches after step 2 are still the reference run's
    short = compare(plan, reference, log("abcd"), 3, log("de"))
    assert short[2][0] is False


def test_step_bars_start_their_clock_at_the_first_step() -> None:
    with StepBar("run", 10, enabled=True) as bar:  # (on stderr, which pytest captures)
        assert bar.bar is None  # nothing shown while workers start and jax compiles
        time.sleep(0.01)  # a slow start (workers, compiling)
        first_step = time.time()  # (tqdm's clock) the slow start is over
        for _ in range(10):
            bar.update()
        assert bar.bar.n == 10
        assert bar.bar.start_t >= first_step  # the slow start is not in its rate


def test_check_options_plans_one_epoch_or_the_steps_asked_for() -> None:
    assert check_options(20_000, 64, 0, None, 2) == Plan(416, 208, 312)
    assert check_options(30, 64, 0, 10, 0) == Plan.of(10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((2, 64, 0, None, 0), "size must be at least 3, got 2."),
        ((100, 0, 0, None, 0), "batch_size must be at least 1, got 0."),
        ((100, 8, -1, None, 0), r"seed must be in \[0, 2\*\*32 - 1\) .*got -1."),
        ((100, 8, 2**32 - 1, None, 0), r"got 4294967295."),
        ((100, 8, 0, None, -1), r"workers must be >= 0 \(0: no worker processes\), got -1."),
        ((30, 64, 0, None, 0), "One epoch of size 30 holds only 0 batches of 64"),
    ],
)
def test_check_options_names_the_wrong_option(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        check_options(*options)
