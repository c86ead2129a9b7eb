"""The CPU cores this process may run on: what sizes worker counts and who reads."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one).

    Examples:
        >>> available_cores() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
