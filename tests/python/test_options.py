"""Tests for grainfn._src.python.options.

Grain's internal options path.
"""

from __future__ import annotations

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def test_options_module_builds_the_options_grainfn_reads() -> None:
    from grainfn._src.python import options as grain_options

    options = grain_options.MultiprocessingOptions(num_workers=2, per_worker_buffer_size=128)
    assert options == grainfn.MultiprocessingOptions(2, 128)
    assert grain_options.ReadOptions is grainfn.ReadOptions
