"""Packing: variable-length sequences packed into fixed-length rows, as in Grain.

The stage is `grainfn._src.packing.stream` (first-fit and best-fit packing);
concat-then-split and pack-and-batch are stages of their own; the other
modules are what they share: the options, bins, arrays and trees.
"""

from grainfn._src.packing.spec import PackOptions as PackOptions
from grainfn._src.packing.spec import PackSpec as PackSpec
from grainfn._src.packing.stream import PackedStream as PackedStream
from grainfn._src.packing.stream import PackState as PackState
from grainfn._src.packing.stream import best_fit_pack as best_fit_pack
from grainfn._src.packing.stream import first_fit_pack as first_fit_pack

__all__ = [
    "PackOptions",
    "PackSpec",
    "PackState",
    "PackedStream",
    "best_fit_pack",
    "first_fit_pack",
]
