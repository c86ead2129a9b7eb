"""Data sources: anything with `len()` and `[]`, the protocol naming them, and ArrayRecord files.

`ArrayRecordDataSource` reads ArrayRecord files; `write_array_records` writes
them, and `encode_array` / `decode_array` turn numpy arrays into records and
back. array_record itself is imported on first use, and so is
`SharedMemoryDataSource` (with `multiprocessing.shared_memory`).
"""

# Each public name is imported once, in the `name as name` form (see grainfn._src.lazy).
from typing import TYPE_CHECKING

from grainfn._src.formats.array_record.codec import decode_array as decode_array
from grainfn._src.formats.array_record.codec import encode_array as encode_array
from grainfn._src.formats.array_record.source import ArrayRecordDataSource as ArrayRecordDataSource
from grainfn._src.formats.array_record.writer import write_array_records as write_array_records
from grainfn._src.lazy import lazy_attributes
from grainfn._src.stages.sources import RandomAccessDataSource as RandomAccessDataSource
from grainfn._src.stages.sources import RangeDataSource as RangeDataSource

if TYPE_CHECKING:
    from grainfn._src.formats.shared_list import SharedMemoryDataSource as SharedMemoryDataSource

__getattr__, __dir__, __all__ = lazy_attributes(globals())
