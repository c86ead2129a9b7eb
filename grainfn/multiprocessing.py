"""Grain's `grain.multiprocessing` names: worker options and arrays in shared memory.

>>> import grainfn.multiprocessing as mp
>>> options = mp.MultiprocessingOptions(num_workers=2)
>>> array = mp.SharedMemoryArray((2, 3), dtype="int32")
>>> array[:] = 7
>>> int(array.sum()), array.metadata.shape
(42, (2, 3))
>>> array.unlink_on_del()
>>> del array
"""

# Each public name is imported once, in the `name as name` form (see grainfn._src.lazy).
from grainfn._src.facade.options import MultiprocessingOptions as MultiprocessingOptions
from grainfn._src.formats.shared_array import SharedMemoryArray as SharedMemoryArray
from grainfn._src.formats.shared_array import (
    SharedMemoryArrayMetadata as SharedMemoryArrayMetadata,
)
from grainfn._src.lazy import lazy_attributes

__getattr__, __dir__, __all__ = lazy_attributes(globals())
