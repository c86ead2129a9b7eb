"""Tests for grainfn._src.python.samplers.

Grain's internal samplers path, against Grain 0.2.18.
"""

from __future__ import annotations

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def test_samplers_module_gives_grains_order() -> None:
    from grain._src.python.samplers import IndexSampler as Theirs

    from grainfn._src.python.samplers import IndexSampler

    mine = IndexSampler(num_records=11, shuffle=True, seed=7, num_epochs=2)
    grains = Theirs(num_records=11, shuffle=True, seed=7, num_epochs=2)
    assert [mine[i].record_key for i in range(22)] == [grains[i].record_key for i in range(22)]
    assert IndexSampler is grainfn.samplers.IndexSampler
