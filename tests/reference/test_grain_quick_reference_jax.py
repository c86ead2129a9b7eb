"""The code examples of grain-quick-reference-jax.md ("quick reference"), run with grainfn.

The quick reference uses Grain's legacy top-level names. The rules the tests
follow are in reference/shared.py. Its DataLoader, IndexSampler, sharding and
training-loop examples are run in test_loader_examples.py (the loop with a
plain-JAX step: the Flax NNX and optax parts are not run, neither is a
dependency).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn as grain

from reference.shared import assert_same, quick_reference_ops


def test_quick_reference_data_source() -> None:
    class MySource(grain.RandomAccessDataSource):
        def __init__(self, data_items):
            self._data = data_items

        def __len__(self):
            return len(self._data)

        def __getitem__(self, idx):
            return self._data[idx]  # Load raw record

    my_source = MySource([b"rec0", b"rec1", b"rec2"])
    assert len(my_source) == 3
    ds = grain.MapDataset.source(my_source)
    assert len(ds) == 3
    assert ds[1] == b"rec1"
    assert list(ds) == [b"rec0", b"rec1", b"rec2"]


class ImageRecords:
    """Stand-in source for the quick reference's transforms: a fresh dict per read."""

    def __len__(self) -> int:
        return 5

    def __getitem__(self, idx: int) -> dict[str, Any]:
        image = np.arange(6, dtype=np.uint8).reshape(2, 3) + 40 * idx
        return {"image": image, "label": idx}


def quick_reference_transforms(grain: Any) -> Any:
    ops = quick_reference_ops(grain)
    # The quick reference passes `ops` to a DataLoader (test_loader_examples.py);
    # here they also go to MapDataset.apply.
    return list(grain.MapDataset.source(ImageRecords()).seed(42).apply(ops))


@pytest.mark.grain
def test_quick_reference_custom_transforms() -> None:
    import grain.python as real_grain

    batches = quick_reference_transforms(grain)
    assert len(batches) == 1
    (batch,) = batches
    assert list(batch) == ["image", "label"]
    assert batch["image"].shape == (5, 2, 3) and batch["image"].dtype == np.float32
    assert batch["label"].tolist() == [0, 1, 2, 3, 4]
    records = ImageRecords()
    for idx, image in enumerate(batch["image"]):
        normalized = records[idx]["image"].astype(np.float32) / 255.0
        assert np.array_equal(image, normalized) or np.array_equal(image, np.fliplr(normalized))
    # Grain 0.2.18 has these names in grain.python only; grainfn has them at the top level too.
    assert_same(batches, quick_reference_transforms(real_grain))
