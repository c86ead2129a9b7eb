"""The cores this process may run on: its affinity, which a worker count defaults to."""

from __future__ import annotations

import os

import pytest

from grainfn._src.parallel import cores
from grainfn._src.parallel.cores import available_cores


def test_the_cores_are_those_of_the_affinity_mask() -> None:
    assert available_cores() == len(os.sched_getaffinity(0)) >= 1


def test_without_an_affinity_mask_the_cores_are_the_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(cores.os, "sched_getaffinity")  # as on macOS
    assert available_cores() == (os.cpu_count() or 1)
    monkeypatch.setattr(cores.os, "cpu_count", lambda: None)  # unknown: one core
    assert available_cores() == 1
