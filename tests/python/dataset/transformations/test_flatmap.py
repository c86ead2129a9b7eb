"""Tests for grainfn._src.python.dataset.transformations.flatmap.

Grain's flat-map path (axlearn), against Grain 0.2.18.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn
import grainfn.experimental

pytestmark = pytest.mark.grain


class Split:
    """A FlatMapTransform that splits a number into its decimal digits (axlearn's fan-out use)."""

    @staticmethod
    def of(base: type) -> Any:
        class Digits(base):  # type: ignore[misc, valid-type]
            max_fan_out = 3

            def flat_map(self, element: Any) -> list[int]:
                return [int(d) for d in str(element)]

        return Digits()


def test_flatmap_module_builds_axlearns_flat_map() -> None:
    import grain
    from grain._src.python.dataset.transformations import flatmap as theirs

    from grainfn._src.python.dataset.transformations import flatmap as ours

    def run(library: Any, module: Any) -> list[int]:
        ds = library.MapDataset.range(95, 105)
        digits = Split.of(library.experimental.FlatMapTransform)
        flat = module.FlatMapMapDataset(parent=ds, transform=digits)
        return [int(x) for x in flat.to_iter_dataset()]

    digits = [int(d) for n in range(95, 105) for d in str(n)]
    assert run(grainfn, ours) == run(grain, theirs) == digits
    assert ours.FlatMapIterDataset is grainfn.experimental.FlatMapIterDataset
