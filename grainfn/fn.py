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

from typing import TYPE_CHECKING

from grainfn._src.combinators import (
    batch,
    concatenate,
    filter,
    flat_map,
    from_dataset,
    interleave,
    limit,
    map,
    map_with_index,
    mix,
    mp_prefetch,
    random_map,
    range,
    rebatch,
    repeat,
    seed,
    select_from_datasets,
    shuffle,
    slice,
    source,
    window_shuffle,
    zip,
)
from grainfn._src.dataset import Dataset
from grainfn._src.interleave import InterleaveSlot, InterleaveState
from grainfn._src.lazy import lazy_attributes
from grainfn._src.reading import elements, iterate, state_from_dict, state_to_dict
from grainfn._src.rebatch import RebatchState
from grainfn._src.state import (
    CountState,
    DatasetPosition,
    LimitState,
    MixState,
    RepeatState,
    SplitState,
)
from grainfn._src.stream import END, Stream, StreamIterator
from grainfn._src.window_shuffle_stream import WindowShuffleState
from grainfn._src.zip import ZipState

if TYPE_CHECKING:
    from grainfn._src.element_spec import element_spec
    from grainfn._src.inspect.graph import draw, save_pipeline, to_dot
    from grainfn._src.inspect.stats import StageStats, stage_stats
    from grainfn._src.inspect.timing import timed
    from grainfn._src.inspect.trace import Trace, TraceStep, trace
    from grainfn._src.inspect.tree import describe, describe_text
    from grainfn._src.packing import PackState, best_fit_pack, first_fit_pack
    from grainfn._src.packing.concat_then_split import ConcatThenSplitState, concat_then_split
    from grainfn._src.padding import batch_and_pad
    from grainfn._src.parquet import ParquetPosition, parquet

__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    attributes={
        "element_spec": "grainfn._src.element_spec",
        **dict.fromkeys(["draw", "save_pipeline", "to_dot"], "grainfn._src.inspect.graph"),
        **dict.fromkeys(["StageStats", "stage_stats"], "grainfn._src.inspect.stats"),
        "timed": "grainfn._src.inspect.timing",
        **dict.fromkeys(["Trace", "TraceStep", "trace"], "grainfn._src.inspect.trace"),
        **dict.fromkeys(["describe", "describe_text"], "grainfn._src.inspect.tree"),
        **dict.fromkeys(["PackState", "best_fit_pack", "first_fit_pack"], "grainfn._src.packing"),
        **dict.fromkeys(
            ["ConcatThenSplitState", "concat_then_split"], "grainfn._src.packing.concat_then_split"
        ),
        "batch_and_pad": "grainfn._src.padding",
        **dict.fromkeys(["ParquetPosition", "parquet"], "grainfn._src.parquet"),
    },
)

__all__ = [
    "trace",
    "to_dot",
    "timed",
    "stage_stats",
    "draw",
    "save_pipeline",
    "describe_text",
    "describe",
    "TraceStep",
    "Trace",
    "StageStats",
    "END",
    "ConcatThenSplitState",
    "PackState",
    "best_fit_pack",
    "concat_then_split",
    "first_fit_pack",
    "CountState",
    "Dataset",
    "DatasetPosition",
    "InterleaveSlot",
    "InterleaveState",
    "LimitState",
    "MixState",
    "ParquetPosition",
    "RebatchState",
    "RepeatState",
    "SplitState",
    "Stream",
    "StreamIterator",
    "WindowShuffleState",
    "ZipState",
    "batch",
    "batch_and_pad",
    "concatenate",
    "element_spec",
    "elements",
    "filter",
    "flat_map",
    "from_dataset",
    "interleave",
    "iterate",
    "limit",
    "map",
    "map_with_index",
    "mix",
    "mp_prefetch",
    "parquet",
    "random_map",
    "range",
    "rebatch",
    "repeat",
    "seed",
    "select_from_datasets",
    "shuffle",
    "slice",
    "source",
    "state_from_dict",
    "state_to_dict",
    "window_shuffle",
    "zip",
]
