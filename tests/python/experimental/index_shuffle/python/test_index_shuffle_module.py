"""Tests for grainfn._src.python.experimental.index_shuffle.python.index_shuffle_module.

Grain's index_shuffle path, against Grain 0.2.18.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.grain


def test_index_shuffle_module_gives_grains_permutation() -> None:
    from grain._src.python.experimental.index_shuffle.python import (
        index_shuffle_module as theirs,
    )

    from grainfn._src.python.experimental.index_shuffle.python import (
        index_shuffle_module as ours,
    )

    for seed, max_index in [(0, 0), (5, 9), (2**31, 1000)]:
        indices = range(min(max_index + 1, 40))
        mine = [ours.index_shuffle(i, max_index=max_index, seed=seed, rounds=4) for i in indices]
        grains = [
            theirs.index_shuffle(i, max_index=max_index, seed=seed, rounds=4) for i in indices
        ]
        assert mine == grains
    whole = [ours.index_shuffle(i, max_index=99, seed=3, rounds=4) for i in range(100)]
    assert sorted(whole) == list(range(100))
