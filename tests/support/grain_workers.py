"""Grain's worker processes, forked from a server that has imported Grain.

Grain 0.2.18 starts each `mp_prefetch` (and DataLoader) worker with the
`spawn` start method: a fresh interpreter that imports Grain, and through it
jax, before it reads a record. On this project's 2-core machine that is 1.5 to
5 s per worker, and the differential tests start hundreds of them. Forked from
multiprocessing's fork server, which imports Grain once, a worker starts in a
tenth of a second. Its elements do not depend on how it started: it unpickles
the same pipeline (cloudpickle's bytes) into modules the server imported fresh,
as a spawned worker would, not into ones copied from the test's process.
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


def fork_grain_workers() -> None:
    """Makes Grain's workers start from the fork server, where Grain is imported.

    Only once Grain is imported (the test modules that run it import it), so a
    test process that never runs Grain never loads it.
    """
    if "grain" not in sys.modules or "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from grain._src.python.dataset.transformations import process_prefetch

    if not isinstance(process_prefetch.mp, _ForkServerOnly):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOADED))
        process_prefetch.mp = _ForkServerOnly(context)
