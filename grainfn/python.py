"""Grain's legacy `grain.python` names, as aliases of the current ones.

`import grainfn.python as grain` runs code written for `import grain.python as grain`.
"""

import importlib
from typing import Any

from grainfn import experimental
from grainfn._src.facade.config import config
from grainfn._src.facade.data_loader import DataLoader
from grainfn._src.facade.data_loader import DataLoaderIterator as PyGrainDatasetIterator
from grainfn._src.facade.dataset import DatasetIterator, IterDataset, MapDataset
from grainfn._src.facade.load import load
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.formats.array_record.source import ArrayRecordDataSource
from grainfn._src.formats.shared_array import SharedMemoryArray
from grainfn._src.formats.shared_list import SharedMemoryDataSource as InMemoryDataSource
from grainfn._src.loader.legacy import (
    BatchOperation,
    FilterOperation,
    MapOperation,
    Operation,
    RandomMapOperation,
)
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn._src.loader.samplers import IndexSampler, Sampler, SequentialSampler
from grainfn._src.loader.sharding import NoSharding, ShardByJaxProcess, ShardOptions
from grainfn._src.stages.sources import RandomAccessDataSource, RangeDataSource
from grainfn._src.transforms import (
    Batch,
    DatasetSelectionMap,
    Transformation,
    Transformations,
)
from grainfn._src.transforms import Filter as FilterTransform
from grainfn._src.transforms import FlatMap as FlatMapTransform
from grainfn._src.transforms import Map as MapTransform
from grainfn._src.transforms import MapWithIndex as MapWithIndexTransform
from grainfn._src.transforms import RandomMap as RandomMapTransform
from grainfn.constants import (
    DATASET_INDEX,
    EPOCH,
    INDEX,
    META_FEATURES,
    RECORD,
    RECORD_KEY,
    SEED,
)

__all__ = [
    "DATASET_INDEX",
    "EPOCH",
    "INDEX",
    "META_FEATURES",
    "RECORD",
    "RECORD_KEY",
    "SEED",
    "ArrayRecordDataSource",
    "Batch",
    "BatchOperation",
    "DataLoader",
    "DatasetIterator",
    "DatasetSelectionMap",
    "FilterOperation",
    "FilterTransform",
    "FlatMapTransform",
    "InMemoryDataSource",
    "IndexSampler",
    "IterDataset",
    "MapDataset",
    "MapOperation",
    "MapTransform",
    "MapWithIndexTransform",
    "MultiprocessingOptions",
    "NoSharding",
    "Operation",
    "PyGrainDatasetIterator",
    "RandomAccessDataSource",
    "RandomMapOperation",
    "RandomMapTransform",
    "RangeDataSource",
    "ReadOptions",
    "Record",
    "RecordMetadata",
    "Sampler",
    "SequentialSampler",
    "ShardByJaxProcess",
    "ShardOptions",
    "SharedMemoryArray",
    "Transformation",
    "Transformations",
    "config",
    "experimental",
    "load",
]

_CHECKPOINT_NAMES = {
    "PyGrainCheckpointHandler": "CheckpointHandler",
    "PyGrainCheckpointSave": "CheckpointSave",
    "PyGrainCheckpointRestore": "CheckpointRestore",
}


def __getattr__(name: str) -> Any:
    # The checkpoint names import Orbax and JAX, so they are looked up on first use.
    if name in _CHECKPOINT_NAMES:
        return getattr(importlib.import_module("grainfn.checkpoint"), _CHECKPOINT_NAMES[name])
    raise AttributeError(f"module 'grainfn.python' has no attribute {name!r}")
