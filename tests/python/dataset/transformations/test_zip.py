"""Tests for grainfn._src.python.dataset.transformations.zip.

Grain's zip path, against Grain 0.2.18.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


def test_zip_module_zips_as_grain() -> None:
    import grain
    from grain._src.python.dataset.transformations.zip import ZipIterDataset as Theirs

    from grainfn._src.python.dataset.transformations.zip import ZipIterDataset

    def parents(library: Any) -> list[Any]:
        return [
            library.MapDataset.range(5).to_iter_dataset(),
            library.MapDataset.range(10, 15).map(str).to_iter_dataset(),
        ]

    assert list(ZipIterDataset(parents(grainfn))) == list(Theirs(parents(grain)))
    assert ZipIterDataset is grainfn.experimental.ZipIterDataset
