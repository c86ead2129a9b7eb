"""Tests for grainfn._src.python.data_loader.

Grain's internal DataLoader path (axlearn), against Grain 0.2.18.
"""

from __future__ import annotations

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def test_determine_worker_count_is_the_data_loaders_rule() -> None:
    from grain._src.python import data_loader as theirs

    from grainfn._src.parallel.cores import available_cores
    from grainfn._src.python import data_loader as ours

    assert ours._determine_worker_count(input_worker_count=3) == 3
    assert theirs._determine_worker_count(input_worker_count=3) == 3
    assert ours._determine_worker_count(input_worker_count=None) == available_cores()
    with pytest.raises(ValueError, match="worker_count must be an integer >= 0, got -1"):
        ours._determine_worker_count(-1)
    assert (ours.DataLoader, ours.DataLoaderIterator) == (
        grainfn.DataLoader,
        grainfn.DataLoaderIterator,
    )
