"""Grain's `rebatch` module's facade classes: their iterators resume.

What the stage yields, against Grain's, is tested with the stage in
tests/stages/test_rebatch.py; here, the facade classes' `get_state` and `set_state`.
"""

from __future__ import annotations

from typing import Any

import grainfn as grain
from grainfn.experimental import RebatchIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_facade_get_state_and_set_state_resume_a_rebatch() -> None:
    def make() -> Any:
        return RebatchIterDataset(grain.MapDataset.range(13).to_iter_dataset().batch(5), 4)

    assert_get_state_resumes(make)
