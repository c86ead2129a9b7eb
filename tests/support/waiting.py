"""Waiting on what another thread or process does: by polling, bounded, and named.

A test never sleeps for a fixed time and then assumes something happened: a
busy machine can stretch any interval. It waits for the thing itself, up to a
generous bound, and fails naming what did not happen.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from types import FrameType

GENEROUS = 60.0
"""Seconds any wait may take before it counts as a hang: far beyond a busy machine's delays."""


def wait_until(condition: Callable[[], object], what: str, seconds: float = GENEROUS) -> None:
    """Polls `condition` until it is true; fails saying `what` did not happen in time."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {seconds:.0f} s")
        time.sleep(0.005)


@contextlib.contextmanager
def no_hang(what: str, seconds: float = GENEROUS) -> Iterator[None]:
    """Fails if the block takes longer than `seconds`: a hang, not a slow machine."""
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    assert took < seconds, f"{what} took {took:.0f} s, longer than {seconds:.0f} s: a hang"


def inside_a_call_from(frame: FrameType | None, function: str) -> bool:
    """Whether `frame` runs below a call made by `function`, not `function`'s own lines.

    Say, inside the `next(it)` of a test's read loop named `function`.
    """
    if frame is None or frame.f_code.co_name == function:
        return False
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False
