"""The demo's data: synthetic images, their records, and the pipeline over them."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn._src.demo import data


def test_written_records_are_the_synthetic_images(files) -> None:
    from grainfn.sources import ArrayRecordDataSource

    images = data.SyntheticImages(size=120, seed=1)
    source = ArrayRecordDataSource(files["cats"])
    assert len(source) == 120
    assert len(files["cats"]) == 4 and len(files["dogs"]) == 2
    for index in (0, 57, 119):
        stored = data.decode(source[index])
        np.testing.assert_array_equal(stored["image"], images[index]["image"])
        assert stored["label"] == images[index]["label"]


def test_labels_are_learnable_from_the_images() -> None:
    images = data.SyntheticImages(size=50, seed=3)
    for index in range(50):
        item = images[index]
        label = item["label"]
        row, column = 4 * (label // 4), 4 * (label % 4)
        patch = item["image"][row : row + 4, column : column + 4, label % 3]
        assert patch.min() >= 95  # the bright patch marks the label


def test_synthetic_images_refuse_an_index_out_of_range() -> None:
    with pytest.raises(IndexError, match="index 10 is out of range for 10 images"):
        data.SyntheticImages(size=10, seed=0)[10]


@pytest.mark.slow
def test_pipeline_batches_do_not_depend_on_the_number_of_workers(files) -> None:
    def digests(workers: int) -> list[str]:
        with iter(data.pipeline(files, 8, 5, workers)) as batches:
            return [data.digest(next(batches)) for _ in range(25)]  # more than one epoch

    without = digests(0)
    assert len(set(without)) == 25
    assert digests(2) == without


def test_epoch_batches_is_the_length_of_the_batched_mix() -> None:
    grain = data.grain
    mix = grain.MapDataset.mix([grain.MapDataset.range(120), grain.MapDataset.range(40)], [3, 1])
    assert data.epoch_batches(120, 8) == len(mix) // 8 == 20
