"""Faults to inject into pipelines: functions that fail at chosen positions, a set number of times.

A `Fault` is a picklable map function (it runs in worker processes) that acts
normally except at the positions in `at`, where it fails the way `how` says
the first `times` times it reaches them (every time if `times` is None). It
counts across processes with files in `directory`, so "transient" means
transient even when a new worker reads the position again.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

HOWS = ("exit", "sigkill", "raise")
"""How a Fault fails: os._exit(1), SIGKILL to its own process, or raising FaultError."""


class FaultError(Exception):
    """What a Fault raises with how="raise"."""


@dataclasses.dataclass(frozen=True)
class Fault:
    """`x -> x`, failing `how` at the elements in `at`, the first `times` times (None: always)."""

    directory: str
    at: frozenset[int]
    how: str = "raise"
    times: int | None = 1

    def __call__(self, x: Any) -> Any:
        if int(x) in self.at and self._fires(int(x)):
            if self.how == "exit":
                os._exit(1)
            if self.how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise FaultError(f"fault injected at element {x}")
        return x

    def _fires(self, x: int) -> bool:
        if self.times is None:
            return True
        for attempt in range(self.times):
            try:  # O_EXCL: exactly one caller, in any process, takes each attempt
                os.close(os.open(Path(self.directory, f"{x}-{attempt}"), os.O_CREAT | os.O_EXCL))
                return True
            except FileExistsError:
                continue
        return False
