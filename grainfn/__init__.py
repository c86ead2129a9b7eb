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

from typing import TYPE_CHECKING

from grainfn import fn, samplers, sharding, sources, transforms
from grainfn._src.array_record.source import ArrayRecordDataSource
from grainfn._src.dataset import Dataset
from grainfn._src.facade.config import config
from grainfn._src.facade.datasets import IterDataset, MapDataset
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.facade.loader import DataLoader, DataLoaderIterator, load
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.facade.transforms import Batch
from grainfn._src.facade.transforms import Filter as FilterTransform
from grainfn._src.facade.transforms import Map as MapTransform
from grainfn._src.facade.transforms import RandomMap as RandomMapTransform
from grainfn._src.lazy import lazy_attributes
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn._src.loader.samplers import IndexSampler, SequentialSampler
from grainfn._src.loader.sharding import NoSharding, ShardByJaxProcess, ShardOptions
from grainfn._src.parallel.processes import WorkerError
from grainfn._src.sources import RandomAccessDataSource

__all__ = [
    "ArrayRecordDataSource",
    "Batch",
    "DataLoader",
    "DataLoaderIterator",
    "Dataset",
    "DatasetIterator",
    "FilterTransform",
    "IndexSampler",
    "IterDataset",
    "MapDataset",
    "MapTransform",
    "MultiprocessingOptions",
    "NoSharding",
    "RandomAccessDataSource",
    "RandomMapTransform",
    "ReadOptions",
    "Record",
    "RecordMetadata",
    "SequentialSampler",
    "ShardByJaxProcess",
    "ShardOptions",
    "StageStats",
    "Trace",
    "TraceStep",
    "WorkerError",
    "checkpoint",
    "config",
    "describe",
    "describe_text",
    "draw",
    "save_pipeline",
    "experimental",
    "fn",
    "load",
    "python",
    "samplers",
    "sharding",
    "sources",
    "stage_stats",
    "to_dot",
    "trace",
    "transforms",
]
__version__ = "0.1.0"


if TYPE_CHECKING:
    from grainfn import checkpoint, experimental, python
    from grainfn._src.facade.inspection import (
        describe,
        describe_text,
        draw,
        save_pipeline,
        stage_stats,
        to_dot,
        trace,
    )
    from grainfn._src.inspect.stats import StageStats
    from grainfn._src.inspect.trace import Trace, TraceStep

# Imported on first use: `grainfn.checkpoint` loads Orbax and JAX (about a
# second); the others are parts most programs never touch.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    submodules={name: f"grainfn.{name}" for name in ("checkpoint", "experimental", "python")},
    attributes={
        **dict.fromkeys(
            [
                "describe",
                "describe_text",
                "draw",
                "save_pipeline",
                "stage_stats",
                "to_dot",
                "trace",
            ],
            "grainfn._src.facade.inspection",
        ),
        "StageStats": "grainfn._src.inspect.stats",
        **dict.fromkeys(["Trace", "TraceStep"], "grainfn._src.inspect.trace"),
    },
)
