"""Grain's `experimental` names that grainfn supports."""

# Each public name is imported once, in the `name as name` form (see grainfn._src.lazy).
from grainfn._src.facade.base import DatasetOptions as DatasetOptions
from grainfn._src.facade.base import ExecutionTrackingMode as ExecutionTrackingMode
from grainfn._src.facade.cache import CacheIterDataset as CacheIterDataset
from grainfn._src.facade.dataset import WithOptionsIterDataset as WithOptionsIterDataset
from grainfn._src.facade.dataset import get_next_index as get_next_index
from grainfn._src.facade.dataset import set_next_index as set_next_index
from grainfn._src.facade.device_put import device_put as device_put
from grainfn._src.facade.elastic_iterator import ElasticIterator as ElasticIterator
from grainfn._src.facade.flatmap import FlatMapIterDataset as FlatMapIterDataset
from grainfn._src.facade.flatmap import FlatMapMapDataset as FlatMapMapDataset
from grainfn._src.facade.index_shuffle import index_shuffle as index_shuffle
from grainfn._src.facade.interleave import InterleaveIterDataset as InterleaveIterDataset
from grainfn._src.facade.limit import LimitIterDataset as LimitIterDataset
from grainfn._src.facade.map import RngPool as RngPool
from grainfn._src.facade.packing import BestFitPackIterDataset as BestFitPackIterDataset
from grainfn._src.facade.packing import FirstFitPackIterDataset as FirstFitPackIterDataset
from grainfn._src.facade.packing_concat_then_split import BOSHandling as BOSHandling
from grainfn._src.facade.packing_concat_then_split import (
    ConcatThenSplitIterDataset as ConcatThenSplitIterDataset,
)
from grainfn._src.facade.parquet_dataset import ParquetIterDataset as ParquetIterDataset
from grainfn._src.facade.prefetch import (
    ThreadPrefetchDatasetIterator as ThreadPrefetchDatasetIterator,
)
from grainfn._src.facade.prefetch import ThreadPrefetchIterDataset as ThreadPrefetchIterDataset
from grainfn._src.facade.prefetch import multithread_prefetch as multithread_prefetch
from grainfn._src.facade.prefetch_autotune import PerformanceConfig as PerformanceConfig
from grainfn._src.facade.prefetch_autotune import pick_performance_config as pick_performance_config
from grainfn._src.facade.rebatch import RebatchIterDataset as RebatchIterDataset
from grainfn._src.facade.repeat import RepeatIterDataset as RepeatIterDataset
from grainfn._src.facade.shuffle import WindowShuffleIterDataset as WindowShuffleIterDataset
from grainfn._src.facade.shuffle import WindowShuffleMapDataset as WindowShuffleMapDataset
from grainfn._src.facade.testing import (
    assert_equal_output_after_checkpoint as assert_equal_output_after_checkpoint,
)
from grainfn._src.facade.tfrecord_dataset import TFRecordIterDataset as TFRecordIterDataset
from grainfn._src.facade.zip import ZipIterDataset as ZipIterDataset
from grainfn._src.facade.zip import ZipMapDataset as ZipMapDataset
from grainfn._src.inspect.element_spec import ShapeDtypeStruct as ShapeDtypeStruct
from grainfn._src.inspect.element_spec import ShapeDtypeStructProtocol as ShapeDtypeStructProtocol
from grainfn._src.inspect.element_spec import get_element_spec as get_element_spec
from grainfn._src.lazy import lazy_attributes
from grainfn._src.loader.pack_and_batch import PackAndBatchOperation as PackAndBatchOperation
from grainfn._src.stages.batch import batch_and_pad as batch_and_pad
from grainfn._src.transforms import FlatMapTransform as FlatMapTransform
from grainfn._src.transforms import MapWithIndexTransform as MapWithIndexTransform
from grainfn._src.transforms import apply_transformations as apply_transformations

__getattr__, __dir__, __all__ = lazy_attributes(globals())
