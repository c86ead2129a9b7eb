"""Data sources: anything with `len()` and `[]`, the protocol naming them, and ArrayRecord files.

`ArrayRecordDataSource` reads ArrayRecord files; `write_array_records` writes
them, and `encode_array` / `decode_array` turn numpy arrays into records and
back. array_record itself is imported on first use.
"""

from grainfn._src.formats.array_record.codec import decode_array, encode_array
from grainfn._src.formats.array_record.source import ArrayRecordDataSource
from grainfn._src.formats.array_record.writer import write_array_records
from grainfn._src.formats.shared_list import SharedMemoryDataSource
from grainfn._src.stages.sources import RandomAccessDataSource, RangeDataSource

__all__ = [
    "ArrayRecordDataSource",
    "RandomAccessDataSource",
    "RangeDataSource",
    "SharedMemoryDataSource",
    "decode_array",
    "encode_array",
    "write_array_records",
]
