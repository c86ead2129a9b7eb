"""Grain's `experimental` names that grainfn supports."""

from grainfn._src.facade.experimental import (
    FlatMapIterDataset,
    FlatMapMapDataset,
    LimitIterDataset,
    RepeatIterDataset,
    WindowShuffleMapDataset,
    assert_equal_output_after_checkpoint,
    index_shuffle,
)
from grainfn._src.facade.transforms import FlatMap as FlatMapTransform
from grainfn._src.facade.transforms import MapWithIndex as MapWithIndexTransform
from grainfn._src.facade.transforms import apply_transformations

__all__ = [
    "FlatMapIterDataset",
    "FlatMapMapDataset",
    "FlatMapTransform",
    "LimitIterDataset",
    "MapWithIndexTransform",
    "RepeatIterDataset",
    "WindowShuffleMapDataset",
    "apply_transformations",
    "assert_equal_output_after_checkpoint",
    "index_shuffle",
]
