"""Grain's `interleave` module's facade classes: their iterators resume.

What the stage yields, against Grain's, is tested with the stage in
tests/stages/test_interleave.py; here, the facade classes' `get_state` and `set_state`.
"""

from __future__ import annotations

from typing import Any

import grainfn as grain
from grainfn.experimental import InterleaveIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_facade_get_state_and_set_state_resume_an_interleave() -> None:
    def make() -> Any:
        datasets = grain.MapDataset.range(4).map(lambda i: grain.MapDataset.range(10 * i, 11 * i))
        return InterleaveIterDataset(datasets, cycle_length=2).batch(2, batch_fn=list)

    assert_get_state_resumes(make)
