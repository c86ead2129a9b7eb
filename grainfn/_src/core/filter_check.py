"""The check that a filter does not drop nearly everything: Grain's filter thresholds.

The Grain API's iterators check (see `with_options_applied`); the stages of
`grainfn.fn` do not unless given a `FilterCheck`, so they pay nothing for it.

Reading counts the elements a filter (or a map-level filter's holes, read by
`from_dataset`) drops in consecutive windows of `WINDOW` elements it sees. When
a window is full, a ratio of dropped elements at or above `warn_ratio` logs a
warning, and one at or above `raise_ratio` raises ValueError, before the
window's last element is returned. A resumed reader starts a new window.
Neither changes the elements or the states.

The warning is logged the first time in each iterator, then at most once every
`WARN_INTERVAL` seconds by that iterator (Grain logs it at most once a minute
per process): the `FilterCheck` that `with_options_applied` makes for an
iterator carries the `WarningClock` all its filter stages share.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import operator
import time
from typing import Any

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Cursor, PassThroughStream, Stream

WINDOW = 1000
"""The number of elements a filter sees per window."""

WARN_INTERVAL = 60.0
"""Seconds an iterator waits before it logs the filter warning again (Grain's interval)."""

_logger = logging.getLogger("grainfn")


class WarningClock:
    """When one iterator last logged the filter warning; all its filter stages share it.

    Examples:
        >>> clock = WarningClock()
        >>> clock.due(now=100.0), clock.due(now=130.0), clock.due(now=160.0)
        (True, False, True)
    """

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: float | None = None

    def due(self, now: float) -> bool:
        """Whether to log now (then it counts as logged): first, or `WARN_INTERVAL` after."""
        if self.last is not None and now - self.last < WARN_INTERVAL:
            return False
        self.last = now
        return True


@dataclasses.dataclass(frozen=True)
class FilterCheck:
    """The ratios of dropped elements per window that warn and that raise (None: never).

    `clock` paces the warning; it is no part of the check's value (equality,
    repr): each `FilterCheck` made has its own, so each iterator warns.

    Examples:
        >>> FilterCheck()
        FilterCheck(warn_ratio=0.9, raise_ratio=None)
        >>> FilterCheck(None, None).active
        False
    """

    warn_ratio: float | None = 0.9
    raise_ratio: float | None = None
    clock: WarningClock = dataclasses.field(default_factory=WarningClock, compare=False, repr=False)

    @property
    def active(self) -> bool:
        """Whether reading needs to count at all."""
        return self.warn_ratio is not None or self.raise_ratio is not None


NO_CHECK = FilterCheck(None, None)
"""What the stages of `grainfn.fn` do unless told otherwise: no counting, no cost."""

GRAIN_CHECK = FilterCheck()
"""Grain's default, which the Grain API's iterators apply: warn at 90% dropped, never raise."""


class FilterWindow:
    """One reader's window: `left` elements until it is full, `dropped` of those seen in it.

    Readers count into `left` and `dropped` themselves where that is their hot
    loop, and call `full(dropped)` when `WINDOW` elements have been seen; or
    hand what they read to `see`.
    """

    __slots__ = ("check", "dropped", "left", "stage")

    def __init__(self, check: FilterCheck, stage: str) -> None:
        self.check, self.stage = check, stage
        self.left, self.dropped = WINDOW, 0

    def see(self, seen: list[Any]) -> None:
        """Counts `seen` (None where an element was dropped), judging each window that fills.

        Examples:
            >>> window = FilterWindow(FilterCheck(None, 0.5), "filter(f)")
            >>> window.see([1, None] * 300)  # 600 seen, 300 dropped: no window is full
            >>> window.left, window.dropped
            (400, 300)
            >>> window.see([None] * 400)
            Traceback (most recent call last):
            ...
            ValueError: filter(f) dropped 70.00% of the last 1000 elements it saw, ...
        """
        while len(seen) >= self.left:  # a window fills inside `seen`
            head, seen = seen[: self.left], seen[self.left :]
            dropped = self.dropped + holes(head)
            self.left, self.dropped = WINDOW, 0
            self.full(dropped)
        self.left -= len(seen)
        self.dropped += holes(seen)

    def full(self, dropped: int) -> None:
        """Judges a full window in which `dropped` elements were dropped.

        Raises:
            ValueError: if the ratio reaches `raise_ratio`.
        """
        ratio = dropped / WINDOW
        check = self.check
        if check.raise_ratio is not None and ratio >= check.raise_ratio:
            raise ValueError(
                f"{self.stage} dropped {ratio:.2%} of the last {WINDOW} elements it saw, at or "
                f"above filter_raise_threshold_ratio={check.raise_ratio}. Check the predicate, "
                "or filter the source beforehand; to turn this check off, set "
                "DatasetOptions(filter_raise_threshold_ratio=None) with WithOptionsIterDataset."
            )
        warn = check.warn_ratio is not None and ratio >= check.warn_ratio
        if warn and check.clock.due(time.monotonic()):
            _logger.warning(
                "%s dropped %.2f%% of the last %d elements it saw, at or above "
                "filter_warn_threshold_ratio=%s. Check the predicate; to silence this, set "
                "DatasetOptions(filter_warn_threshold_ratio=None) with WithOptionsIterDataset.",
                self.stage,
                ratio * 100,
                WINDOW,
                check.warn_ratio,
            )


def holes(seen: list[Any]) -> int:
    """How many of `seen` are None (by identity: `list.count` would compare arrays with ==).

    Examples:
        >>> import numpy as np
        >>> holes([None, np.arange(3), None])
        2
    """
    return sum(map(operator.is_, seen, itertools.repeat(None)))


WARN_SETTING, RAISE_SETTING = "filter_warn_threshold_ratio", "filter_raise_threshold_ratio"
"""The names of the option settings that make a FilterCheck (Grain's DatasetOptions fields)."""


@dataclasses.dataclass(frozen=True, repr=False)
class WithOptionsStream(PassThroughStream):
    """Options for the whole pipeline around it: the settings a user set explicitly.

    It changes neither the elements nor the states, so it is no stage of the
    pipeline's description. `with_options_applied` reads the settings of all
    such stages, upstream first, so that a later setting wins.
    """

    transparent = True
    opens_as_parent = True
    spec_rule = SpecRule.PARENT

    settings: tuple[tuple[str, Any], ...]

    def open(self, state: Any) -> Cursor:
        return self.parent.open(state)

    def describe_stage(self) -> str:
        return f"with_options({dict(self.settings)})"


def with_options_applied(stream: Stream[Any]) -> Stream[Any]:
    """`stream` with the filter check of its options given to every stage that checks.

    The check is Grain's default (`GRAIN_CHECK`) where the options set nothing:
    the Grain API's iterators read through this.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.filter(bool, fn.from_dataset(fn.range(3)))
        >>> options = WithOptionsStream(stream, ((RAISE_SETTING, 0.5),))
        >>> with_options_applied(options).parent.check
        FilterCheck(warn_ratio=0.9, raise_ratio=0.5)
    """
    settings: dict[str, Any] = {}
    _collect(stream, settings)
    check = FilterCheck(
        settings.get(WARN_SETTING, GRAIN_CHECK.warn_ratio),
        settings.get(RAISE_SETTING, GRAIN_CHECK.raise_ratio),
    )
    return _with_check(stream, check)


def _collect(node: Any, settings: dict[str, Any]) -> None:
    if isinstance(node, Dataset):
        return
    for parent in node.parents:
        _collect(parent, settings)
    if isinstance(node, WithOptionsStream):
        settings.update(node.settings)


def _with_check(node: Any, check: FilterCheck) -> Any:
    if isinstance(node, Dataset):
        return node
    parents = tuple(_with_check(parent, check) for parent in node.parents)
    if any(new is not old for new, old in zip(parents, node.parents)):
        node = with_parents(node, parents) or node
    if any(f.name == "check" for f in dataclasses.fields(node)):
        node = dataclasses.replace(node, check=check)  # a stage that checks its filtering
    return node
