"""Grain's `zip` module's facade classes: their iterators resume.

What the stage yields, against Grain's, is tested with the stage in
tests/stages/test_zip.py; here, the facade classes' `get_state` and `set_state`.
"""

from __future__ import annotations

from typing import Any

import grainfn as grain
from grainfn.experimental import ZipIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_facade_get_state_and_set_state_resume_a_zip() -> None:
    def make() -> Any:
        a = grain.MapDataset.range(7).to_iter_dataset()
        return ZipIterDataset([a, grain.MapDataset.range(10, 20)], strict=False)

    assert_get_state_resumes(make)
