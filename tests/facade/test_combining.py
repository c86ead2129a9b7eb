"""Grain's experimental zip, interleave, window shuffle and rebatch classes: their iterators resume.

What the stages yield, against Grain's, is tested with each stage in
tests/stages/ (test_zip.py, test_interleave.py, test_window_shuffle.py,
test_rebatch.py); here, the facade classes' `get_state` and `set_state`.
"""

from __future__ import annotations

from typing import Any

import grainfn as grain
from grainfn.experimental import (
    InterleaveIterDataset,
    RebatchIterDataset,
    WindowShuffleIterDataset,
    ZipIterDataset,
)

from support.facade_resuming import assert_get_state_resumes


def test_facade_get_state_and_set_state_resume_a_zip() -> None:
    def make() -> Any:
        a = grain.MapDataset.range(7).to_iter_dataset()
        return ZipIterDataset([a, grain.MapDataset.range(10, 20)], strict=False)

    assert_get_state_resumes(make)


def test_facade_get_state_and_set_state_resume_an_interleave() -> None:
    def make() -> Any:
        datasets = grain.MapDataset.range(4).map(lambda i: grain.MapDataset.range(10 * i, 11 * i))
        return InterleaveIterDataset(datasets, cycle_length=2).batch(2, batch_fn=list)

    assert_get_state_resumes(make)


def test_facade_get_state_and_set_state_resume_a_window_shuffle() -> None:
    def make() -> Any:
        ds = grain.MapDataset.range(11).to_iter_dataset()
        return WindowShuffleIterDataset(ds, window_size=4, seed=5)

    assert_get_state_resumes(make)


def test_facade_get_state_and_set_state_resume_a_rebatch() -> None:
    def make() -> Any:
        return RebatchIterDataset(grain.MapDataset.range(13).to_iter_dataset().batch(5), 4)

    assert_get_state_resumes(make)
