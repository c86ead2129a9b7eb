"""The combinators of `grainfn.fn`: curried, configuration first, data last."""

from grainfn._src.combinators.elements import (
    batch,
    filter,
    flat_map,
    map,
    map_with_index,
    random_map,
)
from grainfn._src.combinators.positions import (
    concatenate,
    from_dataset,
    limit,
    mix,
    mp_prefetch,
    range,
    repeat,
    seed,
    select_from_datasets,
    shuffle,
    slice,
    source,
    window_shuffle,
)
from grainfn._src.combinators.streams import interleave, rebatch, zip

__all__ = [
    "batch",
    "concatenate",
    "filter",
    "flat_map",
    "from_dataset",
    "interleave",
    "limit",
    "map",
    "map_with_index",
    "mix",
    "mp_prefetch",
    "random_map",
    "range",
    "rebatch",
    "repeat",
    "seed",
    "select_from_datasets",
    "shuffle",
    "slice",
    "source",
    "window_shuffle",
    "zip",
]
