"""Grain's `index_shuffle` module's facade function: index_shuffle, against Grain's.

The permutation itself (`permute_index`) is tested in tests/index/test_shuffle.py.
"""

from __future__ import annotations

import pytest

import grainfn


def test_index_shuffle_matches_grain() -> None:
    import grain as real

    # Not 2**k with even k >= 16: there Grain's block is a bit short (see docs/functional.md).
    for max_index in (0, 9, 1000, 2**20 + 4):
        for index in (0, max_index // 2, max_index):
            assert grainfn.experimental.index_shuffle(
                index, max_index=max_index, seed=11, rounds=4
            ) == real.experimental.index_shuffle(index, max_index=max_index, seed=11, rounds=4)
        assert grainfn.experimental.index_shuffle(
            max_index, max_index=max_index, seed=11, rounds=8
        ) == real.experimental.index_shuffle(max_index, max_index=max_index, seed=11, rounds=8)
    with pytest.raises(ValueError, match="rounds=7"):
        grainfn.experimental.index_shuffle(1, max_index=9, seed=1, rounds=7)
