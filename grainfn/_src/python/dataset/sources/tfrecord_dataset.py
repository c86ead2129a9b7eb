"""Grain's internal `grain._src.python.dataset.sources.tfrecord_dataset`, for its importers.

MaxText imports `_TFRecordReader` and `_TFRecordDatasetIterator` from this path and
subclasses them to read TFRecord files from Cloud Storage. `_TFRecordReader` is
`grainfn._src.formats.tfrecord_reader.TFRecordReader` (records from the file
object in its `_reader`), `_TFRecordDatasetIterator` is
`grainfn._src.facade.tfrecord_dataset.TFRecordFileIterator` (a `DatasetIterator` over such
a reader, with Grain's state `{"reader_offset": n}`), and `TFRecordIterDataset`
is `grainfn.experimental.TFRecordIterDataset`.
"""

from grainfn._src.facade.tfrecord_dataset import TFRecordFileIterator as _TFRecordDatasetIterator
from grainfn._src.facade.tfrecord_dataset import TFRecordIterDataset
from grainfn._src.formats.tfrecord_reader import TFRecordReader as _TFRecordReader

__all__ = ["TFRecordIterDataset", "_TFRecordDatasetIterator", "_TFRecordReader"]
