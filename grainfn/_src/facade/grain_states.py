"""Grain's own states, read into grainfn's records and written from them, where exact.

A run that moves from Grain to grainfn keeps its data position: Grain's
`get_state()` of a pipeline (also inside an Orbax checkpoint Grain wrote) is
turned into the state record of the same grainfn pipeline (`from_grain`). A
run going back does the reverse (`to_grain`, behind
`DatasetIterator.grain_state()`): Grain's `set_state` of the same pipeline
continues from it. Each stage reads and writes its part of Grain's nested dict:

- `to_iter_dataset()`: `{"next_index": n}`, the position in the MapDataset;
- `map`, `filter`, `batch`, `seed` and the other stages whose state is their
  parent's (prefetch, options, cache): their parent's state;
- `random_map`: `{"parent": ..., "index_for_rng": n}`;
- `map_with_index`: `{"parent": ..., "counter": n}`;
- `IterDataset.mix`: `{"parents": [...] or {name: ...}, "index": i, "stop": bool}`;
- `LimitIterDataset`: `{"parent": ..., "count_elements_read": n}`;
- `RepeatIterDataset`: `{"parent": ..., "epoch": e}`;
- `ZipIterDataset`: `{"parents": [...]}`;
- `WindowShuffleIterDataset`: `{"parent_window_start_state": ..., "window_index": w,
  "pos_in_window": p}` (after a window's last element, `w` is already the next
  window's: the reader reads the window to find where the next one starts);
- `FlatMapIterDataset`: `{"parent": ..., "next_index_in_buffer": k}`;
- `FirstFitPackIterDataset` and `BestFitPackIterDataset`: `{"parent": ..., "next_row": r,
  "counter": n}`;
- `InterleaveIterDataset`: the slot visited next, the next dataset to open, and
  each slot's dataset, state and whether it ran out;
- `TFRecordIterDataset`: `{"reader_offset": n}`, the byte offset of the next record;
- `ParquetIterDataset` of one file: `{"row_group": g, "index_within_row_group": r}`,
  the next row (of several files: an interleave of such states);
- `RebatchIterDataset`: `{"parent": ..., "batch_idx": r}`, the parent's state
  before the batch being cut and the next row in it (once that batch is used
  up, `r` is its length: the batch is read once to find the state after it);
- `ConcatThenSplitIterDataset`: `{"parent_state": ..., "remainder_slices": {feature:
  [start, stop]}, "elements_from_buffer_after_checkpoint": n}`, where the current
  round started (the parent before the element being cut, and the tokens of each
  token feature packed before, `[-1, -1]` for none) and the round's rows returned;
- an `IterDataset` subclass with its own `__iter__` (`fn.from_iterable`): the
  state of the user's iterator, as its `get_state()` gave it.

Written states equal Grain's at the same position, except where Grain names
it otherwise (both continue alike): just after an element's last `flat_map`
output, a window's last element or a rebatch's parent batch, Grain names the
one that ended, grainfn the next; after a repeat's last epoch Grain keeps the
parent at its end, grainfn at its start. Not written: concat-then-split (Grain's
slices name the cut element's length) and Grain's `mp_prefetch` over
grainfn's own order (see below).

Grain's `mp_prefetch` state is an interleave of its workers' states: it is read
and written where grainfn's `mp_prefetch` yields Grain's worker order
(`GrainWorkerOrderStream`). Any other stage is refused with a message naming
it: Grain's `mp_prefetch` over grainfn's own order, whose state splits the
position between its workers (its Grain state does not determine grainfn's);
so is an interleave state whose `future_states` holds states of datasets not
opened yet.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import PassThroughStream, Stream
from grainfn._src.elastic.worker_order import GrainWorkerOrderStream
from grainfn._src.facade.grain_loader_states import dataset_position, reads_loader_records
from grainfn._src.formats.parquet import ParquetFileStream, ParquetPosition
from grainfn._src.formats.tfrecord import TFRecordPosition, TFRecordStream
from grainfn._src.packing.concat_then_split import ConcatThenSplitState, ConcatThenSplitStream
from grainfn._src.packing.stream import PackedStream, PackState
from grainfn._src.parallel.prefetch import PrefetchedStream
from grainfn._src.stages.flat_map import FlatMappedStream, SplitState
from grainfn._src.stages.interleave import (
    InterleavedDatasetsStream,
    InterleavedStream,
    InterleaveSlot,
    InterleaveState,
)
from grainfn._src.stages.iterable import IterableState, IterableStream
from grainfn._src.stages.limit import LimitedStream, LimitState
from grainfn._src.stages.map import CountState, IndexMappedStream
from grainfn._src.stages.mix import MixedStream, MixState
from grainfn._src.stages.random_map import RandomMappedStream
from grainfn._src.stages.rebatch import RebatchedStream, RebatchState, batch_rows
from grainfn._src.stages.repeat import RepeatedStream, RepeatState
from grainfn._src.stages.window_shuffle import WindowShuffledStream, WindowShuffleState
from grainfn._src.stages.zip import ZippedStream, ZipState

_GRAIN_PREFETCH_KEYS = {"workers_state", "iterators_in_use_indices"}
"""Keys of Grain's mp_prefetch state: one iterator per worker, each over its slice of the data."""


def from_grain(stream: Stream[Any], state: Any, path: str = "state") -> Any:
    """The record of `stream` at the position Grain's state `state` names.

    Raises:
        ValueError: naming the stage whose Grain state cannot be read, or the
            key that is missing.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(9).to_iter_dataset().map(str).batch(2)
        >>> from_grain(ds.core, {"next_index": 4})
        DatasetPosition(position=4)
    """
    if isinstance(stream, FromDatasetStream):
        taken = _count(state, "next_index", path)
        return records.DatasetPosition(dataset_position(stream.dataset, taken))
    if isinstance(stream, PassThroughStream):  # map, filter, batch, seed, prefetch...
        grain_prefetch = isinstance(state, dict) and bool(_GRAIN_PREFETCH_KEYS & state.keys())
        in_grains_order = isinstance(stream.parents[0], GrainWorkerOrderStream)
        if isinstance(stream, PrefetchedStream) and grain_prefetch and not in_grains_order:
            raise ValueError(
                f"Grain's {path} is the state of its mp_prefetch, which splits the position "
                "between its worker processes; it does not determine grainfn's (whose workers "
                "never split the data). Read it in Grain's worker order: "
                "ds.mp_prefetch(options, grain_worker_order=True) with Grain's worker count."
            )
        (parent,) = stream.parents
        return from_grain(parent, state, path)
    read = _READERS.get(type(stream))
    if read is None:
        raise ValueError(
            f"A state written by Grain cannot be read for the stage {stream.describe_stage()!r}: "
            "its Grain state does not determine grainfn's. Grain states are read for "
            "to_iter_dataset, map, filter, batch, random_map, map_with_index, mix, limit, "
            "repeat, zip, window shuffle, flat_map, first-fit and best-fit packing, "
            "concat-then-split, interleave, rebatch, TFRecordIterDataset, ParquetIterDataset, a "
            "user's own iterator and the prefetch stages; "
            "restart the data position for this pipeline."
        )
    return read(stream, state, path)


def _parent(stream: Any, state: Any, path: str, key: str = "parent") -> Any:
    """The record of `stream.parent` from Grain's `state[key]`."""
    return from_grain(stream.parent, _field(state, key, path), f"{path}.{key}")


def _counted(stream: Any, state: Any, path: str) -> CountState:
    key = "index_for_rng" if isinstance(stream, RandomMappedStream) else "counter"
    return CountState(_count(state, key, path), _parent(stream, state, path))


def _mixed(stream: MixedStream, state: Any, path: str) -> MixState:
    parents = _field(state, "parents", path)
    if isinstance(parents, dict) and stream.names is not None:  # a mix of named components
        parents = [parents.get(name) for name in stream.names]
    components = _each(stream.components, parents, path)
    return MixState(_count(state, "index", path), _flag(state, "stop", path), components)


def _zipped(stream: ZippedStream, state: Any, path: str) -> ZipState:
    return ZipState(False, _each(stream.components, _field(state, "parents", path), path))


def _each(streams: tuple[Stream[Any], ...], states: Any, path: str) -> tuple[Any, ...]:
    if not isinstance(states, list) or len(states) != len(streams):
        raise ValueError(
            f"Grain's {path}.parents must list {len(streams)} component states, "
            f"got {records.describe_value(states)}."
        )
    return tuple(
        from_grain(c, s, f"{path}.parents[{i}]") for i, (c, s) in enumerate(zip(streams, states))
    )


def _limited(stream: LimitedStream, state: Any, path: str) -> LimitState:
    return LimitState(_count(state, "count_elements_read", path), _parent(stream, state, path))


def _repeated(stream: RepeatedStream, state: Any, path: str) -> RepeatState:
    return RepeatState(_count(state, "epoch", path), _parent(stream, state, path))


def _window_shuffled(stream: WindowShuffledStream, state: Any, path: str) -> WindowShuffleState:
    start = _parent(stream, state, path, "parent_window_start_state")
    window, emitted = _count(state, "window_index", path), _count(state, "pos_in_window", path)
    if not emitted:
        return WindowShuffleState(window, 0, start)
    # Once a window's last element is out, Grain's state still names that window's start
    # and its size, with `window_index` already the next window's.
    after = _after_window(stream, start, emitted, f"{path}.pos_in_window")
    if after is None:  # inside the window
        return WindowShuffleState(window, emitted, start)
    return WindowShuffleState(window, 0, after)


def _after_window(stream: WindowShuffledStream, start: Any, emitted: int, where: str) -> Any:
    """The parent's record after a window of `emitted` elements from `start`, if it ends there.

    A window ends after `window_size` elements, or where the parent ends. It
    is read once from `start` (as Grain's own restore reads it); None if the
    window goes on.
    """
    if emitted > stream.window_size:
        raise ValueError(
            f"Grain's {where} is {emitted}, but a window holds at most {stream.window_size} "
            "elements: it is the state of another pipeline."
        )
    stream.parent.check_state(start, where.rsplit(".", 1)[0] + ".parent_window_start_state")
    cursor = stream.parent.open(start)
    try:
        read = len(cursor.next_many(emitted))
        if read < emitted:
            raise ValueError(
                f"Grain's {where} is {emitted}, but the parent has {read} elements from the "
                "window's start: it is the state of another pipeline, or the data changed."
            )
        after = cursor.state()
        ends = emitted == stream.window_size or not cursor.next_many(1)
    finally:
        cursor.close()
    return after if ends else None


def _flat_mapped(stream: FlatMappedStream, state: Any, path: str) -> SplitState:
    return SplitState(_count(state, "next_index_in_buffer", path), _parent(stream, state, path))


def _packed(stream: PackedStream, state: Any, path: str) -> PackState:
    row, emitted = _count(state, "next_row", path), _count(state, "counter", path)
    return PackState(row, emitted, _parent(stream, state, path))


def _interleaved(stream: Any, state: Any, path: str) -> InterleaveState:
    datasets = _field(state, "iterators_in_use_indices", path)
    states = _field(state, "iterators_in_use_states", path)
    exhausted = _field(state, "exhausted", path)
    lists = all(isinstance(value, list) for value in (datasets, states, exhausted))
    if not lists or not len(datasets) == len(states) == len(exhausted) == stream.slots:
        raise ValueError(
            f"Grain's {path} must hold the datasets, states and `exhausted` flags of "
            f"{stream.slots} slots, got {records.describe_value(state)}."
        )
    if state.get("future_states"):  # left by Grain's elastic set_shard_states
        raise ValueError(
            f"Grain's {path}.future_states holds the states of datasets this interleave has not "
            f"opened yet ({records.describe_value(state['future_states'])}); grainfn's "
            "interleave opens each dataset at its start, so this state does not determine "
            "grainfn's. Restart the data position for this pipeline."
        )
    flags = [_check_flag(ended, f"{path}.exhausted[{i}]") for i, ended in enumerate(exhausted)]
    for i, dataset in enumerate(datasets):
        where = f"{path}.iterators_in_use_indices[{i}]"
        if _check_count(dataset, where) >= stream.count:
            raise ValueError(
                f"Grain's {where} is {dataset}, but this interleave has {stream.count} datasets."
            )
    slots = tuple(
        InterleaveSlot(
            dataset,
            ended,
            from_grain(stream.stream_at(dataset), inner, f"{path}.iterators_in_use_states[{i}]"),
        )
        for i, (dataset, inner, ended) in enumerate(zip(datasets, states, flags))
    )
    slot = _count(state, "next_index_in_cycle", path)
    return InterleaveState(slot, _count(state, "next_index_in_datasets", path), slots)


def _rebatched(stream: RebatchedStream, state: Any, path: str) -> RebatchState:
    # Grain names the parent's state before the batch being cut and the next row in it; once
    # that batch is used up, the row is its length: grainfn names the state after it, row 0.
    parent, row = _parent(stream, state, path), _count(state, "batch_idx", path)
    if not row:
        return RebatchState(0, parent)
    stream.parent.check_state(parent, f"{path}.parent")
    cursor = stream.parent.open(parent)
    try:
        batch = next(iter(cursor.next_many(1)), None)
        after = cursor.state()
    finally:
        cursor.close()
    rows = -1 if batch is None else batch_rows(batch)
    if row > rows:
        raise ValueError(
            f"Grain's {path}.batch_idx is {row}, but the parent's batch there has "
            f"{max(rows, 0)} rows: it is the state of another pipeline, or the data changed."
        )
    return RebatchState(0, after) if row == rows else RebatchState(row, parent)


def _tfrecord(stream: TFRecordStream, state: Any, path: str) -> TFRecordPosition:
    return TFRecordPosition(_count(state, "reader_offset", path))


def _parquet(stream: ParquetFileStream, state: Any, path: str) -> ParquetPosition:
    # The same position as grainfn's: row `index_within_row_group` of row group `row_group`.
    return ParquetPosition(
        _count(state, "row_group", path), _count(state, "index_within_row_group", path)
    )


_NO_REMAINDER = [-1, -1]
"""Grain's slice of a token feature in `remainder_slices` when no element is being cut."""


def _concat_then_split(
    stream: ConcatThenSplitStream, state: Any, path: str
) -> ConcatThenSplitState:
    # Grain's state is taken where a round starts, as grainfn's: the parent before the
    # element being cut, then `n` rows of the round returned. A cut element's slice of a
    # token feature is (tokens packed before, its length): the start is grainfn's offset.
    slices = _field(state, "remainder_slices", path)
    features = stream.token_features
    if not isinstance(slices, dict) or sorted(slices) != sorted(features):
        raise ValueError(
            f"Grain's {path}.remainder_slices must map the token features {list(features)} "
            f"to slices, got {records.describe_value(slices)}: it is the state of another "
            "pipeline."
        )
    offsets = tuple(
        _slice_start(slices[name], f"{path}.remainder_slices[{name!r}]") for name in features
    )
    emitted = _count(state, "elements_from_buffer_after_checkpoint", path)
    return ConcatThenSplitState(emitted, offsets, _parent(stream, state, path, "parent_state"))


def _slice_start(value: Any, where: str) -> int:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        if list(value) == _NO_REMAINDER:
            return 0
        start, stop = value
        if records.is_saved_count(start) and records.is_saved_count(stop) and start <= stop:
            return start
    raise ValueError(
        f"Grain's {where} must be a slice [start, stop] with 0 <= start <= stop, or [-1, -1] "
        f"for no remainder, got {records.describe_value(value)}."
    )


def _iterable(stream: IterableStream, state: Any, path: str) -> IterableState:
    # Grain keeps the user iterator's own state as it is; opening the stage calls its set_state.
    return IterableState(copy.deepcopy(state))


_READERS: dict[type, Callable[[Any, Any, str], Any]] = {
    TFRecordStream: _tfrecord,
    ParquetFileStream: _parquet,
    ConcatThenSplitStream: _concat_then_split,
    IterableStream: _iterable,
    RandomMappedStream: _counted,
    IndexMappedStream: _counted,
    MixedStream: _mixed,
    ZippedStream: _zipped,
    LimitedStream: _limited,
    RepeatedStream: _repeated,
    WindowShuffledStream: _window_shuffled,
    FlatMappedStream: _flat_mapped,
    PackedStream: _packed,
    InterleavedStream: _interleaved,
    InterleavedDatasetsStream: _interleaved,
    GrainWorkerOrderStream: _interleaved,  # Grain's mp_prefetch state is an interleave's
    RebatchedStream: _rebatched,
}
"""How each stage with a state of its own reads Grain's state of the same stage."""


# ---------------------------------------------------------------------------
# Going back: grainfn's records written in Grain's format.


def to_grain(stream: Stream[Any], record: Any, path: str = "state") -> Any:
    """Grain's state of the same pipeline at the position `record` of `stream` names.

    The inverse of `from_grain`, for the stages above whose grainfn record
    determines Grain's state; Grain's `set_state` of the same pipeline
    continues from it with the elements grainfn would have yielded next.

    Raises:
        ValueError: naming the stage whose Grain state grainfn cannot write.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(9).to_iter_dataset().random_map(lambda x, r: x, seed=1)
        >>> grains = {"parent": {"next_index": 4}, "index_for_rng": 4}
        >>> to_grain(ds.core, from_grain(ds.core, grains))
        {'parent': {'next_index': 4}, 'index_for_rng': 4}
    """
    if isinstance(stream, FromDatasetStream):
        if reads_loader_records(stream.dataset):
            raise _unwritable(stream, "a DataLoader's records (write the DataLoader's state)")
        return {"next_index": record.position}
    if isinstance(stream, PrefetchedStream) and not isinstance(
        stream.parent, GrainWorkerOrderStream
    ):
        raise _unwritable(
            stream,
            "Grain's mp_prefetch state splits the position between its worker processes, each "
            "over its own slice of the data, where grainfn's is one position; read in Grain's "
            "worker order (mp_prefetch(options, grain_worker_order=True)) to write it, or write "
            "the state of the same pipeline without mp_prefetch, for Grain without it",
        )
    if isinstance(stream, PassThroughStream):  # map, filter, batch, seed, prefetch...
        (parent,) = stream.parents
        return to_grain(parent, record, path)
    write = _WRITERS.get(type(stream))
    if write is None:
        raise _unwritable(stream, "its grainfn state does not determine Grain's")
    return write(stream, record, path)


def _unwritable(stream: Stream[Any], why: str) -> ValueError:
    return ValueError(
        f"grainfn cannot write Grain's state for the stage {stream.describe_stage()!r}: {why}. "
        "Grain states are written for to_iter_dataset, map, filter, batch, random_map, "
        "map_with_index, mix, limit, repeat, zip, window shuffle, flat_map, first-fit and "
        "best-fit packing, interleave, rebatch, TFRecordIterDataset, ParquetIterDataset, a "
        "user's own iterator and thread prefetch."
    )


def _write_parent(stream: Any, record: Any, path: str, **fields: Any) -> dict[str, Any]:
    return {"parent": to_grain(stream.parent, record.parent, f"{path}.parent"), **fields}


def _write_counted(stream: Any, record: CountState, path: str) -> dict[str, Any]:
    key = "index_for_rng" if isinstance(stream, RandomMappedStream) else "counter"
    return _write_parent(stream, record, path, **{key: record.seen})


def _write_components(streams: tuple[Stream[Any], ...], states: Any, path: str) -> list[Any]:
    return [to_grain(c, s, f"{path}.parents[{i}]") for i, (c, s) in enumerate(zip(streams, states))]


def _write_mixed(stream: MixedStream, record: MixState, path: str) -> dict[str, Any]:
    parents: Any = _write_components(stream.components, record.components, path)
    if stream.names is not None:  # Grain keys a mix of named components by name
        parents = dict(sorted(zip(stream.names, parents)))
    return {"parents": parents, "index": record.position, "stop": record.stopped}


def _write_zipped(stream: ZippedStream, record: ZipState, path: str) -> dict[str, Any]:
    return {"parents": _write_components(stream.components, record.components, path)}


def _write_window_shuffled(
    stream: WindowShuffledStream, record: WindowShuffleState, path: str
) -> dict[str, Any]:
    start = to_grain(stream.parent, record.parent, f"{path}.parent_window_start_state")
    return {
        "parent_window_start_state": start,
        "window_index": record.window,
        "pos_in_window": record.emitted,
    }


def _write_interleaved(stream: Any, record: InterleaveState, path: str) -> dict[str, Any]:
    states = [
        to_grain(stream.stream_at(slot.dataset), slot.parent, f"{path}.iterators_in_use_states")
        for slot in record.components
    ]
    return {
        "next_index_in_cycle": record.slot,
        "next_index_in_datasets": record.next_dataset,
        "iterators_in_use_indices": [slot.dataset for slot in record.components],
        "iterators_in_use_states": states,
        "exhausted": [int(slot.stopped) for slot in record.components],
        "future_states": {},
    }


_WRITERS: dict[type, Callable[[Any, Any, str], Any]] = {
    TFRecordStream: lambda stream, record, path: {"reader_offset": record.offset},
    ParquetFileStream: lambda stream, record, path: {
        "row_group": record.row_group,
        "index_within_row_group": record.row,
    },
    IterableStream: lambda stream, record, path: copy.deepcopy(record.user_state),
    RandomMappedStream: _write_counted,
    IndexMappedStream: _write_counted,
    MixedStream: _write_mixed,
    ZippedStream: _write_zipped,
    LimitedStream: lambda stream, record, path: _write_parent(
        stream, record, path, count_elements_read=record.taken
    ),
    RepeatedStream: lambda stream, record, path: _write_parent(
        stream, record, path, epoch=record.epoch
    ),
    WindowShuffledStream: _write_window_shuffled,
    FlatMappedStream: lambda stream, record, path: _write_parent(
        stream, record, path, next_index_in_buffer=record.taken
    ),
    PackedStream: lambda stream, record, path: _write_parent(
        stream, record, path, next_row=record.row, counter=record.emitted
    ),
    InterleavedStream: _write_interleaved,
    InterleavedDatasetsStream: _write_interleaved,
    GrainWorkerOrderStream: _write_interleaved,
    RebatchedStream: lambda stream, record, path: _write_parent(
        stream, record, path, batch_idx=record.offset
    ),
}
"""How each stage with a state of its own writes its record as Grain's state of the stage."""


def _field(state: Any, key: str, path: str) -> Any:
    if not isinstance(state, dict) or key not in state:
        raise ValueError(
            f"Grain's {path} should hold {key!r} for this pipeline, "
            f"got {records.describe_value(state)}: it is the "
            "state of another pipeline."
        )
    return state[key]


def _count(state: Any, key: str, path: str) -> int:
    return _check_count(_field(state, key, path), f"{path}.{key}")


def _check_count(value: Any, where: str) -> int:
    if not records.is_saved_count(value):
        raise ValueError(
            f"Grain's {where} must be an integer >= 0, got {records.describe_value(value)}."
        )
    return value


def _flag(state: Any, key: str, path: str) -> bool:
    return _check_flag(_field(state, key, path), f"{path}.{key}")


def _check_flag(value: Any, where: str) -> bool:
    # A bool, or 0 or 1 (Grain writes interleave's `exhausted` flags as ints); "false",
    # 0.5 or -7 would otherwise read as a flag, and a flag that is set ends the data.
    if type(value) not in (bool, int) or value not in (0, 1):
        raise ValueError(
            f"Grain's {where} must be true or false (or 1 or 0), got "
            f"{records.describe_value(value)}."
        )
    return bool(value)
