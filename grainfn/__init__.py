"""grainfn: deterministic, fast, checkpointable input pipelines.

Two faces over one core:

- `grainfn.fn`, the functional core: datasets are immutable `(length, index ->
  element)` records built by pure, curried combinators, and streams thread an
  explicit state through `step(state) -> (element, state)`;
- Grain's object API (`MapDataset`, `IterDataset`, `DatasetIterator`, the
  transforms, ...), so that `import grainfn as grain` runs Grain code.

>>> import grainfn as grain
>>> ds = grain.MapDataset.range(8).seed(1).shuffle().batch(4)
>>> [sorted(b.tolist()) for b in ds]
[[3, 5, 6, 7], [0, 1, 2, 4]]
"""

from grainfn import experimental, fn, python, sources, transforms
from grainfn._src.dataset import Dataset
from grainfn._src.facade.datasets import IterDataset, MapDataset
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.facade.transforms import Batch
from grainfn._src.facade.transforms import Filter as FilterTransform
from grainfn._src.facade.transforms import Map as MapTransform
from grainfn._src.facade.transforms import RandomMap as RandomMapTransform
from grainfn._src.sources import RandomAccessDataSource

__all__ = [
    "Batch",
    "Dataset",
    "DatasetIterator",
    "FilterTransform",
    "IterDataset",
    "MapDataset",
    "MapTransform",
    "MultiprocessingOptions",
    "RandomAccessDataSource",
    "RandomMapTransform",
    "ReadOptions",
    "experimental",
    "fn",
    "python",
    "sources",
    "transforms",
]
__version__ = "0.1.0"
