"""Tests for grainfn._src.python.dataset.transformations.prefetch.

Grain's thread-prefetch path, against Grain 0.2.18.
"""

from __future__ import annotations

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def test_prefetch_module_prefetches_in_threads() -> None:
    import grain
    from grain._src.python.dataset.transformations.prefetch import (
        ThreadPrefetchIterDataset as Theirs,
    )

    from grainfn._src.python.dataset.transformations.prefetch import ThreadPrefetchIterDataset

    mine = ThreadPrefetchIterDataset(
        grainfn.MapDataset.range(30).to_iter_dataset().map(lambda x: x * 3),
        prefetch_buffer_size=4,
    )
    grains = Theirs(
        grain.MapDataset.range(30).to_iter_dataset().map(lambda x: x * 3),
        prefetch_buffer_size=4,
    )
    assert list(mine) == list(grains)
    assert ThreadPrefetchIterDataset is grainfn.experimental.ThreadPrefetchIterDataset
