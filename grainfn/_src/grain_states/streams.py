"""Grain's own states, read into grainfn's records and written from them, where exact.

A run that moves from Grain to grainfn keeps its data position: Grain's
`get_state()` of a pipeline (also inside an Orbax checkpoint Grain wrote) is
turned into the state record of the same grainfn pipeline (`from_grain`). A
run going back does the reverse (`to_grain`, behind
`DatasetIterator.grain_state()`): Grain's `set_state` of the same pipeline
continues from it. Each stage reads and writes its part of Grain's nested dict:

- a stage whose state is its parent's (map, filter, batch, seed, the prefetch
  and option stages): its parent's;
- a stage that declares its Grain keys in its own module (`grain_keys`, see
  `grainfn._src.core.grain_keys`; limit, repeat, random_map and the rest):
  its counters under those keys, its parent's state under the parent key
  (`stages()` lists them, by Grain's name);
- the few whose Grain state is not counters over one parent, with readers
  here: `to_iter_dataset()` (`{"next_index": n}`, the position in the
  MapDataset), `IterDataset.mix`, `ZipIterDataset`, `InterleaveIterDataset`
  (and Grain's mp_prefetch order), `ConcatThenSplitIterDataset` (read only)
  and a user's own iterator (`fn.from_iterable`: the state its `get_state()`
  gave).

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
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import PassThroughStream, Stream, stage_kinds
from grainfn._src.grain_states.loaders import dataset_position, reads_loader_records
from grainfn._src.packing.concat_then_split import ConcatThenSplitState, ConcatThenSplitStream
from grainfn._src.parallel.mp_prefetch import PrefetchedStream
from grainfn._src.shards.worker_order import GrainWorkerOrderStream
from grainfn._src.stages.interleave import (
    InterleavedDatasetsStream,
    InterleavedStream,
    InterleaveSlot,
    InterleaveState,
)
from grainfn._src.stages.iterable import IterableState, IterableStream
from grainfn._src.stages.mix import MixedStream, MixState
from grainfn._src.stages.zip import ZippedStream, ZipState

_GRAIN_PREFETCH_KEYS = {"workers_state", "iterators_in_use_indices"}
"""Keys of Grain's mp_prefetch state: one iterator per worker, each over its slice of the data."""

_STAGE_PACKAGES = ("stages", "packing", "formats")
"""The packages of `grainfn._src` whose modules define stages."""


def stages() -> list[str]:
    """Grain's names of grainfn's stages whose states are read and written, but pass-throughs.

    Those that declare their keys (`grain_keys`) in their modules, and those
    with readers here.

    Examples:
        >>> "LimitIterDataset" in stages(), "to_iter_dataset" in stages()
        (True, True)
    """
    for package in _STAGE_PACKAGES:  # a stage's class exists once its module is imported
        root = importlib.import_module(f"grainfn._src.{package}")
        for module in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            importlib.import_module(module.name)
    declared = {kind.grain_keys.stage for kind in stage_kinds() if kind.grain_keys is not None}
    return sorted(declared | set(_IRREGULAR_NAMES), key=str.lower)


def _supported(done: str = "read") -> str:
    return (
        f"Grain states are {done} for {', '.join(stages())}, and every stage whose state is its "
        "parent's (map, filter, batch, seed, prefetch, options)"
    )


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
    keys = stream.grain_keys
    if keys is not None:
        fields = {field: _count(state, key, path) for key, field in keys.counters}
        if keys.parent is not None:
            fields["parent"] = _parent(stream, state, path, keys.parent)
        return stream.grain_record(keys.build(fields), path)
    read = _READERS.get(type(stream))
    if read is None:
        raise ValueError(
            f"A state written by Grain cannot be read for the stage {stream.describe_stage()!r}: "
            f"its Grain state does not determine grainfn's. {_supported()}; restart the data "
            "position for this pipeline."
        )
    return read(stream, state, path)


def _parent(stream: Any, state: Any, path: str, key: str = "parent") -> Any:
    """The record of `stream.parent` from Grain's `state[key]`."""
    return from_grain(stream.parent, _field(state, key, path), f"{path}.{key}")


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
    ConcatThenSplitStream: _concat_then_split,
    IterableStream: _iterable,
    MixedStream: _mixed,
    ZippedStream: _zipped,
    InterleavedStream: _interleaved,
    InterleavedDatasetsStream: _interleaved,
    GrainWorkerOrderStream: _interleaved,  # Grain's mp_prefetch state is an interleave's
}
"""How each stage whose Grain state is not counters over one parent reads Grain's state."""

_IRREGULAR_NAMES = (
    "to_iter_dataset",
    "IterDataset.mix",
    "ZipIterDataset",
    "InterleaveIterDataset",
    "ConcatThenSplitIterDataset (read only)",
    "a user's own iterator",
)
"""Grain's names of the stages read above (and written below), for messages."""


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
    keys = stream.grain_keys
    if keys is not None:
        written = {}
        if keys.parent is not None:
            (parent,) = stream.parents
            written[keys.parent] = to_grain(parent, record.parent, f"{path}.{keys.parent}")
        return written | {key: getattr(record, field) for key, field in keys.counters}
    write = _WRITERS.get(type(stream))
    if write is None:
        raise _unwritable(stream, "its grainfn state does not determine Grain's")
    return write(stream, record, path)


def _unwritable(stream: Stream[Any], why: str) -> ValueError:
    return ValueError(
        f"grainfn cannot write Grain's state for the stage {stream.describe_stage()!r}: {why}. "
        f"{_supported('written')}, except concat-then-split and "
        "mp_prefetch in grainfn's own order."
    )


def _write_components(streams: tuple[Stream[Any], ...], states: Any, path: str) -> list[Any]:
    return [to_grain(c, s, f"{path}.parents[{i}]") for i, (c, s) in enumerate(zip(streams, states))]


def _write_mixed(stream: MixedStream, record: MixState, path: str) -> dict[str, Any]:
    parents: Any = _write_components(stream.components, record.components, path)
    if stream.names is not None:  # Grain keys a mix of named components by name
        parents = dict(sorted(zip(stream.names, parents)))
    return {"parents": parents, "index": record.position, "stop": record.stopped}


def _write_zipped(stream: ZippedStream, record: ZipState, path: str) -> dict[str, Any]:
    return {"parents": _write_components(stream.components, record.components, path)}


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
    IterableStream: lambda stream, record, path: copy.deepcopy(record.user_state),
    MixedStream: _write_mixed,
    ZippedStream: _write_zipped,
    InterleavedStream: _write_interleaved,
    InterleavedDatasetsStream: _write_interleaved,
    GrainWorkerOrderStream: _write_interleaved,
}
"""How each stage with a reader above (but concat-then-split) writes Grain's state."""


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
