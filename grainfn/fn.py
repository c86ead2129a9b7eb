"""The functional API of grainfn: datasets and streams as values, combinators as functions.

A dataset is an immutable record with a `length` and a pure `get(index)`. A
stream is a record with `init() -> state` and a pure `step(state) -> (element,
state)`. Every combinator takes its configuration first and the data last, and
is curried, so a pipeline reads as a `toolz.pipe`:

>>> import toolz
>>> from grainfn import fn
>>> ds = toolz.pipe(fn.range(10), fn.seed(3), fn.shuffle(), fn.map(lambda x: x * 10))
>>> ds.length
10
>>> sorted(fn.elements(ds))
[0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
>>> stream = toolz.pipe(ds, fn.from_dataset, fn.filter(lambda x: x > 40), fn.batch(2))
>>> [b.tolist() for b in fn.iterate(stream)] == [b.tolist() for b in fn.iterate(stream)]
True
"""

# Each public name is imported once, in the `name as name` form; those under
# TYPE_CHECKING are imported on first use (see grainfn._src.lazy).
from typing import TYPE_CHECKING

from grainfn._src.core.dataset import Dataset as Dataset
from grainfn._src.core.iterator import StreamIterator as StreamIterator
from grainfn._src.core.reading import elements as elements
from grainfn._src.core.reading import from_dataset as from_dataset
from grainfn._src.core.reading import iterate as iterate
from grainfn._src.core.state import DatasetPosition as DatasetPosition
from grainfn._src.core.state import EpochPosition as EpochPosition
from grainfn._src.core.state import SavedEpochPosition as SavedEpochPosition
from grainfn._src.core.state_codec import state_from_dict as state_from_dict
from grainfn._src.core.state_codec import state_to_dict as state_to_dict
from grainfn._src.core.stream import END as END
from grainfn._src.core.stream import Stream as Stream
from grainfn._src.lazy import lazy_attributes
from grainfn._src.stages.batch import batch as batch
from grainfn._src.stages.batch import batch_and_pad as batch_and_pad
from grainfn._src.stages.cache import cache as cache
from grainfn._src.stages.filter import filter as filter
from grainfn._src.stages.flat_map import FlatMapState as FlatMapState
from grainfn._src.stages.flat_map import flat_map as flat_map
from grainfn._src.stages.interleave import InterleaveSlot as InterleaveSlot
from grainfn._src.stages.interleave import InterleaveState as InterleaveState
from grainfn._src.stages.interleave import interleave as interleave
from grainfn._src.stages.iterable import IterablePosition as IterablePosition
from grainfn._src.stages.iterable import from_iterable as from_iterable
from grainfn._src.stages.limit import LimitState as LimitState
from grainfn._src.stages.limit import limit as limit
from grainfn._src.stages.map import IndexedState as IndexedState
from grainfn._src.stages.map import map as map
from grainfn._src.stages.map import map_with_index as map_with_index
from grainfn._src.stages.mix import MixState as MixState
from grainfn._src.stages.mix import concatenate as concatenate
from grainfn._src.stages.mix import mix as mix
from grainfn._src.stages.mix import select_from_datasets as select_from_datasets
from grainfn._src.stages.random_map import random_map as random_map
from grainfn._src.stages.rebatch import RebatchState as RebatchState
from grainfn._src.stages.rebatch import rebatch as rebatch
from grainfn._src.stages.repeat import RepeatState as RepeatState
from grainfn._src.stages.repeat import repeat as repeat
from grainfn._src.stages.seed import seed as seed
from grainfn._src.stages.shuffle import shuffle as shuffle
from grainfn._src.stages.slice import slice as slice
from grainfn._src.stages.sources import range as range
from grainfn._src.stages.sources import source as source
from grainfn._src.stages.take_while import take_while as take_while
from grainfn._src.stages.thread_prefetch import thread_prefetch as thread_prefetch
from grainfn._src.stages.window_shuffle import WindowShuffleState as WindowShuffleState
from grainfn._src.stages.window_shuffle import window_shuffle as window_shuffle
from grainfn._src.stages.zip import ZipState as ZipState
from grainfn._src.stages.zip import zip as zip

if TYPE_CHECKING:
    from grainfn._src.device.dataset import JaxDataset as JaxDataset
    from grainfn._src.device.dataset import to_jax as to_jax
    from grainfn._src.device.put import put_on_device as put_on_device
    from grainfn._src.elastic.stream import ElasticState as ElasticState
    from grainfn._src.elastic.stream import elastic_batches as elastic_batches
    from grainfn._src.formats.parquet import ParquetPosition as ParquetPosition
    from grainfn._src.formats.parquet import parquet as parquet
    from grainfn._src.formats.tfrecord import TFRecordPosition as TFRecordPosition
    from grainfn._src.formats.tfrecord import tfrecord as tfrecord
    from grainfn._src.formats.tfrecord import write_tfrecords as write_tfrecords
    from grainfn._src.inspect.element_spec import element_spec as element_spec
    from grainfn._src.inspect.graph import draw as draw
    from grainfn._src.inspect.graph import save_pipeline as save_pipeline
    from grainfn._src.inspect.graph import to_dot as to_dot
    from grainfn._src.inspect.stats import StageStats as StageStats
    from grainfn._src.inspect.stats import stage_stats as stage_stats
    from grainfn._src.inspect.timing import timed as timed
    from grainfn._src.inspect.trace import Trace as Trace
    from grainfn._src.inspect.trace import TraceStep as TraceStep
    from grainfn._src.inspect.trace import trace as trace
    from grainfn._src.inspect.tree import describe as describe
    from grainfn._src.inspect.tree import describe_text as describe_text
    from grainfn._src.packing.concat_then_split import ConcatThenSplitState as ConcatThenSplitState
    from grainfn._src.packing.concat_then_split import concat_then_split as concat_then_split
    from grainfn._src.packing.pack_and_batch import PackAndBatchState as PackAndBatchState
    from grainfn._src.packing.pack_and_batch import pack_and_batch as pack_and_batch
    from grainfn._src.packing.stream import PackState as PackState
    from grainfn._src.packing.stream import best_fit_pack as best_fit_pack
    from grainfn._src.packing.stream import first_fit_pack as first_fit_pack
    from grainfn._src.parallel.mp_prefetch import mp_prefetch as mp_prefetch
    from grainfn._src.parallel.ray_placement import PlacementError as PlacementError
    from grainfn._src.parallel.ray_pool import RayPool as RayPool
    from grainfn._src.parallel.ray_prefetch import ray_prefetch as ray_prefetch
    from grainfn._src.shards.logical import logical_shard as logical_shard
    from grainfn._src.shards.worker_order import grain_worker_order as grain_worker_order

__getattr__, __dir__, __all__ = lazy_attributes(globals())
