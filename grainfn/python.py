"""Grain's legacy `grain.python` names, as aliases of the current ones.

`import grainfn.python as grain` runs code written for `import grain.python as grain`.
"""

from grainfn import experimental
from grainfn._src.facade.datasets import IterDataset, MapDataset
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.facade.transforms import (
    Batch,
    DatasetSelectionMap,
    Transformation,
    Transformations,
)
from grainfn._src.facade.transforms import Filter as FilterTransform
from grainfn._src.facade.transforms import FlatMap as FlatMapTransform
from grainfn._src.facade.transforms import Map as MapTransform
from grainfn._src.facade.transforms import MapWithIndex as MapWithIndexTransform
from grainfn._src.facade.transforms import RandomMap as RandomMapTransform
from grainfn._src.sources import RandomAccessDataSource, RangeDataSource

__all__ = [
    "Batch",
    "DatasetIterator",
    "DatasetSelectionMap",
    "FilterTransform",
    "FlatMapTransform",
    "IterDataset",
    "MapDataset",
    "MapTransform",
    "MapWithIndexTransform",
    "MultiprocessingOptions",
    "RandomAccessDataSource",
    "RandomMapTransform",
    "RangeDataSource",
    "ReadOptions",
    "Transformation",
    "Transformations",
    "experimental",
]
