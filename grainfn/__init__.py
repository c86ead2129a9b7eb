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

# Each public name is imported once, in the `name as name` form; those under
# TYPE_CHECKING, and the submodules below, are imported on first use (see
# grainfn._src.lazy).
from typing import TYPE_CHECKING

from grainfn import fn as fn
from grainfn import transforms as transforms
from grainfn._src.core.dataset import Dataset as Dataset
from grainfn._src.core.iterator import ConcurrentReadError as ConcurrentReadError
from grainfn._src.core.validate import UserStopIterationError as UserStopIterationError
from grainfn._src.facade.config import config as config
from grainfn._src.facade.dataset import DatasetIterator as DatasetIterator
from grainfn._src.facade.dataset import IterDataset as IterDataset
from grainfn._src.facade.dataset import MapDataset as MapDataset
from grainfn._src.facade.options import MultiprocessingOptions as MultiprocessingOptions
from grainfn._src.facade.options import ReadOptions as ReadOptions
from grainfn._src.lazy import lazy_attributes
from grainfn._src.parallel.deaths import WorkerError as WorkerError
from grainfn._src.stages.sources import RandomAccessDataSource as RandomAccessDataSource
from grainfn._src.transforms import Batch as Batch
from grainfn._src.transforms import FilterTransform as FilterTransform
from grainfn._src.transforms import MapTransform as MapTransform
from grainfn._src.transforms import RandomMapTransform as RandomMapTransform

if TYPE_CHECKING:
    from grainfn._src.facade.data_loader import DataLoader as DataLoader
    from grainfn._src.facade.data_loader import DataLoaderIterator as DataLoaderIterator
    from grainfn._src.facade.inspection import describe as describe
    from grainfn._src.facade.inspection import describe_text as describe_text
    from grainfn._src.facade.inspection import draw as draw
    from grainfn._src.facade.inspection import save_pipeline as save_pipeline
    from grainfn._src.facade.inspection import stage_stats as stage_stats
    from grainfn._src.facade.inspection import to_dot as to_dot
    from grainfn._src.facade.inspection import trace as trace
    from grainfn._src.facade.load import load as load
    from grainfn._src.formats.array_record.source import (
        ArrayRecordDataSource as ArrayRecordDataSource,
    )
    from grainfn._src.inspect.stats import StageStats as StageStats
    from grainfn._src.inspect.trace import Trace as Trace
    from grainfn._src.inspect.trace import TraceStep as TraceStep
    from grainfn._src.loader.records import Record as Record
    from grainfn._src.loader.records import RecordMetadata as RecordMetadata
    from grainfn._src.loader.samplers import IndexSampler as IndexSampler
    from grainfn._src.loader.samplers import SequentialSampler as SequentialSampler
    from grainfn._src.loader.sharding import NoSharding as NoSharding
    from grainfn._src.loader.sharding import ShardByJaxProcess as ShardByJaxProcess
    from grainfn._src.loader.sharding import ShardOptions as ShardOptions

__version__ = "0.1.0"

# `grainfn.checkpoint` loads Orbax and JAX (about a second); the DataLoader and
# its samplers, sharding and sources load worker processes and numpy.random
# (about 30 ms); the others are parts of Grain's surface most programs never touch.
__getattr__, __dir__, __all__ = lazy_attributes(
    globals(),
    submodules=(
        *("checkpoint", "constants", "experimental", "multiprocessing", "python"),
        *("samplers", "sharding", "sources"),
    ),
)
