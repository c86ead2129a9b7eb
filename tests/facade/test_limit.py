"""Grain's `limit` module's facade class: LimitIterDataset yields its first elements and resumes."""

from __future__ import annotations

from typing import Any

import grainfn
from grainfn.experimental import LimitIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_limit_keeps_the_first_count_elements() -> None:
    assert list(LimitIterDataset(grainfn.MapDataset.range(9).to_iter_dataset(), 4)) == [0, 1, 2, 3]


def test_facade_get_state_and_set_state_resume_a_limit() -> None:
    def make() -> Any:
        ds = grainfn.MapDataset.range(20).seed(3).shuffle().to_iter_dataset()
        return LimitIterDataset(ds.filter(lambda x: x % 3), count=6)

    assert len(list(make())) == 6
    assert_get_state_resumes(make)
