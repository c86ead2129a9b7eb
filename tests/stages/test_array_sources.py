"""fn.source over a dict of arrays: a source of rows, read like any other source."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn import fn


def test_a_dict_of_arrays_is_a_source_of_rows_through_every_reader() -> None:
    images = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    data = {"image": images, "meta": {"label": np.arange(6) % 2, "id": np.arange(6) * 10}}
    ds = fn.shuffle(fn.source(data), seed=3)
    order = fn.shuffle(fn.range(6), seed=3).get_many(range(6))
    for row, i in zip(ds.get_many(range(6)), order):
        np.testing.assert_array_equal(row["image"], images[i])
        assert row["meta"] == {"label": i % 2, "id": i * 10}
    batch = next(fn.iterate(fn.batch(3, fn.from_dataset(ds))))
    np.testing.assert_array_equal(batch["image"], images[order[:3]])
    assert "arrays {'image': '(6, 2, 2) float32'" in repr(ds)


def test_arrays_of_different_lengths_are_refused_naming_their_shapes() -> None:
    with pytest.raises(ValueError, match=r"same first dimension.*'y': \(4,\)"):
        fn.source({"x": np.zeros(3), "y": np.zeros(4)})


def test_other_dicts_stay_sources_by_key() -> None:
    by_position = {0: "a", 1: "b"}  # a dict is a source of its values by key, as before
    assert fn.source(by_position).get_many([0, 1, 2]) == ["a", "b", "a"]
    assert fn.source({"x": [1, 2]}).length == 1  # a list is not an array
