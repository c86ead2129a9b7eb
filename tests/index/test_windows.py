"""Window shuffle: each window of each epoch is a permutation; full windows match Grain."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.index.windows import window_shuffle_indices


@pytest.mark.slow
@settings(max_examples=60)
@given(st.integers(1, 200), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_every_window_of_every_epoch_is_a_permutation(length: int, window: int, seed: int) -> None:
    positions = np.arange(3 * length)
    out = window_shuffle_indices(positions, length, window, seed)
    for epoch in range(3):
        for start in range(0, length, window):
            stop = min(length, start + window)
            got = out[epoch * length + start : epoch * length + stop]
            assert sorted(got.tolist()) == list(
                range(epoch * length + start, epoch * length + stop)
            )
    scalar = fn.window_shuffle(window, fn.range(length), seed=seed)
    assert [scalar.get(int(i)) for i in positions[:: max(1, length // 7)]] == [
        int(v) % length for v in out[:: max(1, length // 7)]
    ]


@pytest.mark.grain
@pytest.mark.parametrize(("length", "window", "seed"), [(1000, 128, 0), (512, 64, 9), (90, 7, 3)])
def test_full_windows_match_grain(length: int, window: int, seed: int) -> None:
    import grain

    ours = fn.window_shuffle(window, fn.range(length), seed=seed)
    theirs = grain.experimental.WindowShuffleMapDataset(
        grain.MapDataset.range(length), window_size=window, seed=seed
    )
    full = length - length % window
    # In later epochs the windows line up with Grain's only when they divide the length.
    checked = range(3 * length) if length % window == 0 else range(full)
    assert ours.get_many(list(checked)) == [theirs[i] for i in checked]
