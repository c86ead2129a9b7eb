"""Grain's `shuffle` module's facade classes: their iterators resume.

What the stage yields, against Grain's, is tested with the stage in
tests/stages/test_window_shuffle.py; here, the facade classes' `get_state` and `set_state`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn.experimental import WindowShuffleIterDataset

from support.facade_resuming import assert_get_state_resumes


def test_facade_get_state_and_set_state_resume_a_window_shuffle() -> None:
    def make() -> Any:
        ds = grain.MapDataset.range(11).to_iter_dataset()
        return WindowShuffleIterDataset(ds, window_size=4, seed=5)

    assert_get_state_resumes(make)


@pytest.mark.slow
@pytest.mark.grain
@settings(max_examples=20)
@given(count=st.integers(1, 60), window=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_window_shuffle_map_dataset_matches_grain(count: int, window: int, seed: int) -> None:
    import grain as real

    ours = grain.experimental.WindowShuffleMapDataset(
        grain.MapDataset.range(count), window_size=window, seed=seed
    )
    theirs = real.experimental.WindowShuffleMapDataset(
        real.MapDataset.range(count), window_size=window, seed=seed
    )
    # Grain's last, short window is drawn differently (see docs/functional.md); full ones agree.
    full = count - count % window
    assert [ours[i] for i in range(full)] == [theirs[i] for i in range(full)]
    assert sorted(ours[i] for i in range(full, count)) == list(range(full, count))
