"""A pipeline that worker processes cannot load until the test says so: a slow start, on cue."""

from __future__ import annotations

import os
import time
from typing import Any

from grainfn import fn

GATE_SECONDS = 120
"""How long a worker waits for the gate before it loads the pipeline anyway."""


class _Gate:
    """`x -> x`; unpickling it (in a worker, loading the pipeline) waits until `path` exists."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, x: Any) -> Any:
        return x

    def __getstate__(self) -> dict[str, str]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.path = state["path"]
        deadline = time.monotonic() + GATE_SECONDS
        while not os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(0.01)


def gated_load(dataset: Any, path: str) -> Any:
    """`dataset`, whose workers cannot load it until the file `path` exists (or 120 s pass)."""
    return fn.map(_Gate(path), dataset)
