"""Grain's `get_next_index` and `set_next_index`: an iterator's position as one integer.

The index is the position of the next element of the map-level dataset the
pipeline reads (`from_dataset`), counted in the units of the stages above it:
a batch counts batches. Stages that pass their parent's position on (map,
seed, mp_prefetch, timing), batch, limit, random_map and map_with_index have
a rule here, and so has an interleave of one dataset (its index is that
dataset's, as in Grain); for a stage whose position is not one index (a
stream filter, a mix, packing, an interleave of more datasets) both functions
raise NotImplementedError naming it, as Grain does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.state import DatasetPosition
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.stages.batch import BatchedStream
from grainfn._src.stages.interleave import (
    InterleavedDatasetsStream,
    InterleavedStream,
    InterleaveSlot,
    InterleaveState,
)
from grainfn._src.stages.limit import LimitedStream, LimitState
from grainfn._src.stages.map import CountingStream, CountState, MappedStream
from grainfn._src.stages.seed import SeededStream

Get = Callable[[Any, Any], int]
Set = Callable[[Any, Any, int], Any]


def get_next_index(ds_iter: DatasetIterator[Any]) -> int:
    """The index of the next element `ds_iter` returns (see the module doc).

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset().batch(2))
        >>> _ = next(it)
        >>> get_next_index(it)
        1
    """
    core = _core(ds_iter)
    return _get(core.stream, core.state)


def set_next_index(ds_iter: DatasetIterator[Any], index: int) -> None:
    """Moves `ds_iter` so that its next element is the one at `index`.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset())
        >>> set_next_index(it, 7)
        >>> next(it)
        7

    Raises:
        IndexError: for an index past the end of the dataset read.
        NotImplementedError: for a pipeline whose position is not one index.
    """
    index = validate.check_nonnegative_int(index, "index")
    core = _core(ds_iter)
    ds_iter.restart_at(_set(core.stream, core.state, index))


def _core(ds_iter: Any) -> Any:
    if not isinstance(ds_iter, DatasetIterator):
        raise TypeError(f"Expected a grainfn DatasetIterator, got {type(ds_iter).__name__}.")
    return ds_iter.core


def _rule(stream: Any) -> tuple[Get, Set]:
    if stream.transparent and len(stream.parents) == 1:  # mp_prefetch, timing: same state
        return _passed_on
    for kind in type(stream).__mro__:
        if kind in RULES:
            return RULES[kind]
    raise NotImplementedError(
        f"get_next_index and set_next_index cannot express the position of the stage "
        f"{stream.describe_stage()!r} as one index; use get_state and set_state."
    )


def _get(stream: Any, state: Any) -> int:
    return _rule(stream)[0](stream, state)


def _set(stream: Any, state: Any, index: int) -> Any:
    return _rule(stream)[1](stream, state, index)


def _dataset_position(stream: FromDatasetStream[Any], index: int) -> DatasetPosition:
    if index > stream.dataset.length:
        raise IndexError(
            f"index {index} is past the end of the dataset read, of length {stream.dataset.length}."
        )
    return DatasetPosition(index)


_Interleave = InterleavedStream | InterleavedDatasetsStream


def _only_dataset(stream: _Interleave, what: str) -> Any:
    """The one dataset of an interleave, as a stream: Grain's rule for its index."""
    if stream.count != 1:
        raise NotImplementedError(
            f"{what} is not supported for an Interleave of {stream.count} datasets "
            f"({stream.describe_stage()}): each of them has its own position, so there is no one "
            "index (Grain supports an interleave of one dataset only, too); use get_state and "
            "set_state."
        )
    return stream.stream_at(0)


def _interleave_get(stream: _Interleave, state: InterleaveState) -> int:
    dataset = _only_dataset(stream, "get_next_index")
    (slot,) = state.components
    return _get(dataset, slot.parent)  # at its end too (Grain's is 0 again then)


def _interleave_set(stream: _Interleave, state: InterleaveState, index: int) -> InterleaveState:
    dataset = _only_dataset(stream, "set_next_index")
    (slot,) = state.components
    parent = _set(dataset, slot.parent, index)
    return InterleaveState(0, 1, (InterleaveSlot(0, False, parent),))  # read on, even if ended


_passed_on: tuple[Get, Set] = (
    lambda stream, state: _get(stream.parents[0], state),
    lambda stream, state, index: _set(stream.parents[0], state, index),
)

RULES: dict[type, tuple[Get, Set]] = {
    FromDatasetStream: (
        lambda stream, state: state.position,
        lambda stream, state, index: _dataset_position(stream, index),
    ),
    MappedStream: _passed_on,
    SeededStream: _passed_on,
    BatchedStream: (  # batches begun: a short last batch counts as one, as in Grain
        lambda stream, state: -(-_get(stream.parent, state) // stream.batch_size),
        lambda stream, state, index: _set(stream.parent, state, index * stream.batch_size),
    ),
    LimitedStream: (
        lambda stream, state: _get(stream.parent, state.parent),
        lambda stream, state, index: LimitState(index, _set(stream.parent, state.parent, index)),
    ),
    CountingStream: (
        lambda stream, state: _get(stream.parent, state.parent),
        lambda stream, state, index: CountState(index, _set(stream.parent, state.parent, index)),
    ),
    InterleavedStream: (_interleave_get, _interleave_set),
    InterleavedDatasetsStream: (_interleave_get, _interleave_set),
}
"""How each stream stage reads and sets the index: `(get, set)`."""
