"""FirstFitPackIterDataset and BestFitPackIterDataset: each builds its combinator's core stream.

How elements pack, against Grain's, is tested with the combinators in tests/packing/.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn.experimental import BestFitPackIterDataset, FirstFitPackIterDataset


def documents() -> Any:
    lengths = (3, 1, 4, 2, 2)
    return grain.MapDataset.source([{"x": np.arange(n)} for n in lengths]).to_iter_dataset()


@pytest.mark.parametrize(
    ("cls", "combinator"),
    [(FirstFitPackIterDataset, fn.first_fit_pack), (BestFitPackIterDataset, fn.best_fit_pack)],
)
def test_the_class_builds_its_combinators_stream_with_the_same_options(
    cls: Any, combinator: Any
) -> None:
    parent = documents()
    packed = cls(parent, length_struct={"x": 4}, num_packing_bins=2, shuffle_bins=False)
    assert packed.core == combinator({"x": 4}, parent.core, num_packing_bins=2, shuffle_bins=False)
    rows = list(packed)
    assert [row["x"].tolist() for row in rows] == [[0, 1, 2, 0], [0, 1, 2, 3], [0, 1, 0, 1]]
    assert rows[0]["x_segment_ids"].tolist() == [1, 1, 1, 2]


def test_a_packing_dataset_resumes_from_its_iterators_state() -> None:
    packed = BestFitPackIterDataset(documents(), length_struct={"x": 4}, num_packing_bins=2)
    it = iter(packed)
    first = next(it)["x"].tolist()
    state = it.get_state()
    rest = [row["x"].tolist() for row in it]
    again = iter(packed)
    again.set_state(state)
    assert [row["x"].tolist() for row in again] == rest
    assert [first, *rest] == [row["x"].tolist() for row in packed]
