"""Grain's `cache` module's facade class: CacheIterDataset, against Grain's, and its states.

The stage itself (`fn.cache`: the parent's elements and states, read once) is
tested in tests/stages/test_cache.py.
"""

from __future__ import annotations

from typing import Any

import grain
import pytest

import grainfn
from grainfn.experimental import CacheIterDataset, RepeatIterDataset

from support.facade_resuming import assert_get_state_resumes


@pytest.mark.grain
@pytest.mark.parametrize("epochs", [1, 3])
def test_cache_then_repeat_equals_grain(epochs: int) -> None:
    outputs = []
    for module in (grain, grainfn):
        ds = module.MapDataset.range(20).seed(2).shuffle().to_iter_dataset()
        ds = module.experimental.CacheIterDataset(ds.filter(lambda x: x % 4 != 1))
        ds = module.experimental.RepeatIterDataset(ds, num_epochs=epochs)
        outputs.append(list(ds))
    assert outputs[1] == outputs[0]


@pytest.mark.grain
def test_restoring_the_first_state_reads_from_the_cache_as_in_grain() -> None:
    outputs = []
    for module in (grain, grainfn):
        ds = module.experimental.CacheIterDataset(
            module.MapDataset.range(6).to_iter_dataset().map(lambda x: x + 1)
        )
        it = iter(ds)
        start = it.get_state()
        first = list(it)
        it.set_state(start)
        outputs.append((first, list(it)))
    assert outputs[1] == outputs[0] == ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6])


def test_facade_get_state_and_set_state_resume_a_repeated_cache() -> None:
    def make() -> Any:
        ds = grainfn.MapDataset.range(7).to_iter_dataset().filter(lambda x: x != 3)
        return RepeatIterDataset(CacheIterDataset(ds), num_epochs=2)

    assert list(make()) == [0, 1, 2, 4, 5, 6] * 2
    assert_get_state_resumes(make)
