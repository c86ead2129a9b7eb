"""Grain's `repeat` module's facade class: RepeatIterDataset repeats its parent and resumes."""

from __future__ import annotations

from typing import Any

import grainfn
from grainfn.experimental import RepeatIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_repeat_reads_the_parent_num_epochs_times() -> None:
    repeated = RepeatIterDataset(grainfn.MapDataset.range(3).to_iter_dataset(), num_epochs=2)
    assert list(repeated) == [0, 1, 2, 0, 1, 2]


def test_facade_get_state_and_set_state_resume_a_repeat_across_epochs() -> None:
    def make() -> Any:
        return RepeatIterDataset(grainfn.MapDataset.range(4).to_iter_dataset(), num_epochs=3)

    assert_get_state_resumes(make)
