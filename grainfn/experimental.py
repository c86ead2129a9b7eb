"""Grain's `experimental` names that grainfn supports."""

from grainfn._src.element_spec import (
    ShapeDtypeStruct,
    ShapeDtypeStructProtocol,
    get_element_spec,
)
from grainfn._src.facade.combining import (
    InterleaveIterDataset,
    RebatchIterDataset,
    WindowShuffleIterDataset,
    ZipIterDataset,
    ZipMapDataset,
)
from grainfn._src.facade.concat_then_split import BOSHandling, ConcatThenSplitIterDataset
from grainfn._src.facade.experimental import (
    FlatMapIterDataset,
    FlatMapMapDataset,
    LimitIterDataset,
    RepeatIterDataset,
    WindowShuffleMapDataset,
    assert_equal_output_after_checkpoint,
    index_shuffle,
)
from grainfn._src.facade.formats import ParquetIterDataset
from grainfn._src.facade.packing import BestFitPackIterDataset, FirstFitPackIterDataset
from grainfn._src.facade.transforms import FlatMap as FlatMapTransform
from grainfn._src.facade.transforms import MapWithIndex as MapWithIndexTransform
from grainfn._src.facade.transforms import apply_transformations
from grainfn._src.padding import batch_and_pad

__all__ = [
    "BOSHandling",
    "BestFitPackIterDataset",
    "ConcatThenSplitIterDataset",
    "FirstFitPackIterDataset",
    "FlatMapIterDataset",
    "FlatMapMapDataset",
    "FlatMapTransform",
    "InterleaveIterDataset",
    "LimitIterDataset",
    "MapWithIndexTransform",
    "ParquetIterDataset",
    "RebatchIterDataset",
    "RepeatIterDataset",
    "ShapeDtypeStruct",
    "ShapeDtypeStructProtocol",
    "WindowShuffleIterDataset",
    "WindowShuffleMapDataset",
    "ZipIterDataset",
    "ZipMapDataset",
    "apply_transformations",
    "assert_equal_output_after_checkpoint",
    "batch_and_pad",
    "get_element_spec",
    "index_shuffle",
]
