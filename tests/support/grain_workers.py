"""Grain's worker processes, forked from a server that has imported Grain.

Grain 0.2.18 starts each `mp_prefetch` (and DataLoader) worker with the
`spawn` start method: a fresh interpreter that imports Grain, and through it
jax, before it reads a record. On this project's 2-core machine that is 1.5 to
5 s per worker, and the differential tests start hundreds of them. Forked from
multiprocessing's fork server, which imports Grain once, a worker starts in a
tenth of a second. Its elements do not depend on how it started: it unpickles
the same pipeline (cloudpickle's bytes, as with `spawn`) into modules freshly
imported in the server, not copied from the test's process, as `spawn` would.
"""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

PRELOADED = ("grain", "numpy", "cloudpickle")
"""What the fork server imports before it forks Grain's workers."""


class _ForkServerOnly:
    """`multiprocessing` as Grain's worker module sees it, with the fork server's context."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def get_context(self, method: str | None = None) -> Any:
        return self._context

    def __getattr__(self, name: str) -> Any:
        return getattr(multiprocessing, name)


def fork_grain_workers() -> bool:
    """Makes Grain's workers start from the fork server, where Grain is imported.

    Returns:
        Whether it did: only once Grain is imported (the test modules that run
        it import it), so a test process that never runs Grain never loads it.
    """
    if "grain" not in sys.modules or "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from grain._src.python.dataset.transformations import process_prefetch

    if isinstance(process_prefetch.mp, _ForkServerOnly):
        return True
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOADED))
    process_prefetch.mp = _ForkServerOnly(context)
    return True
