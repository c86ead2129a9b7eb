"""The filter check: Grain's thresholds on the share of elements a filter drops per window."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.filter_check import (
    GRAIN_CHECK,
    NO_CHECK,
    RAISE_SETTING,
    WARN_INTERVAL,
    WARN_SETTING,
    WINDOW,
    FilterCheck,
    FilterWindow,
    WarningClock,
    WithOptionsStream,
    holes,
    with_options_applied,
)


def test_the_clock_is_due_first_then_once_per_interval() -> None:
    clock = WarningClock()
    assert clock.due(now=5.0)
    assert not clock.due(now=5.0 + WARN_INTERVAL - 0.001)
    assert clock.due(now=5.0 + WARN_INTERVAL)
    assert clock.last == 5.0 + WARN_INTERVAL


def test_a_checks_value_is_its_ratios_and_not_its_clock() -> None:
    assert FilterCheck(0.5, 0.9) == FilterCheck(0.5, 0.9)
    assert FilterCheck(0.5, 0.9).clock is not FilterCheck(0.5, 0.9).clock
    assert FilterCheck(0.9, None) == GRAIN_CHECK and GRAIN_CHECK.active
    assert not NO_CHECK.active
    assert FilterCheck(None, 0.2).active


def test_holes_counts_nones_by_identity() -> None:
    assert holes([]) == 0
    assert holes([None, 0, np.zeros(3), None, np.array(None)]) == 2


def test_a_window_raises_when_it_fills_at_the_ratio() -> None:
    window = FilterWindow(FilterCheck(None, 0.5), "filter(f)")
    window.see([None] * (WINDOW // 2 - 1) + [1] * (WINDOW // 2))  # 499 of 999
    assert (window.left, window.dropped) == (1, WINDOW // 2 - 1)
    with pytest.raises(ValueError, match=r"filter\(f\) dropped 50\.00% of the last 1000 elements"):
        window.see([None])
    assert (window.left, window.dropped) == (WINDOW, 0)  # a new window starts


def test_a_window_below_the_ratio_passes_and_starts_again() -> None:
    window = FilterWindow(FilterCheck(None, 0.5), "filter(f)")
    window.see([None] * 100 + [1] * (2 * WINDOW))  # two windows, 10% and 0% dropped
    assert (window.left, window.dropped) == (WINDOW - 100, 0)


def test_a_full_window_at_the_warning_ratio_logs_on_the_checks_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    check = FilterCheck(0.9, None)
    window = FilterWindow(check, "filter(p)")
    assert check.clock.last is None
    with caplog.at_level(logging.WARNING, logger="grainfn"):
        window.full(100)  # below the ratio: nothing
        window.full(950)
    assert check.clock.last is not None  # the interval now runs for every stage of the check
    assert [r.getMessage()[:44] for r in caplog.records] == [
        "filter(p) dropped 95.00% of the last 1000 el"
    ]
    assert "filter_warn_threshold_ratio=0.9" in caplog.records[0].getMessage()


def test_with_options_applied_gives_every_checking_stage_the_later_setting() -> None:
    inner = fn.filter(bool, fn.from_dataset(fn.range(3)))
    options = WithOptionsStream(inner, ((RAISE_SETTING, 0.5), (WARN_SETTING, 0.7)))
    outer = fn.filter(bool, WithOptionsStream(options, ((RAISE_SETTING, 0.8),)))
    applied = with_options_applied(outer)
    assert applied.check == FilterCheck(0.7, 0.8)
    assert applied.parent.parent.parent.check == FilterCheck(0.7, 0.8)
    assert list(fn.iterate(applied)) == [1, 2]
    plain = with_options_applied(inner)
    assert plain.check == GRAIN_CHECK  # no options: Grain's default
    assert inner.check == NO_CHECK  # the stages of fn do not check unless told


def test_options_are_no_stage_of_the_pipeline() -> None:
    stream = fn.from_dataset(fn.range(4))
    options = WithOptionsStream(stream, ((WARN_SETTING, None),))
    assert options.describe_stage() == "with_options({'filter_warn_threshold_ratio': None})"
    assert list(fn.iterate(options)) == [0, 1, 2, 3]
    it = fn.iterate(options)
    next(it)
    assert it.state == fn.DatasetPosition(1)  # the parent's state
