"""Grain's `get_next_index` and `set_next_index`: a pipeline's position as one integer.

The index is the position of the next element of the map-level dataset the
pipeline reads (`from_dataset`), counted in the units of the stages above it:
a batch counts batches. Each stage says how the index crosses it with its
class attribute `next_index_rule`, a `NextIndexRule` that `RULES` does: its
state is its parent's (PARENT: map, seed), it counts what it passed on
(COUNTER: limit, random_map, map_with_index), it groups (BATCH), or it is an
interleave, whose index is that of its one dataset (INTERLEAVE, as in
Grain). Stages that change how a pipeline runs, not what it yields
(mp_prefetch, timing), pass it on. For any other stage (a stream filter, a
mix, packing, an interleave of more datasets) both functions raise
NotImplementedError naming it, as Grain does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.state import DatasetPosition
from grainfn._src.core.stream import Stream
from grainfn._src.stages.interleave import InterleaveSlot, InterleaveState

Get = Callable[[Any, Any], int]
Set = Callable[[Any, Any, int], Any]


def next_index(stream: Stream[Any], state: Any) -> int:
    """The index of the next element of `stream` at `state` (see the module doc).

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.batch(2, fn.from_dataset(fn.range(10)))
        >>> next_index(stream, fn.DatasetPosition(3))
        2
    """
    return _rule(stream)[0](stream, state)


def at_next_index(stream: Stream[Any], state: Any, index: int) -> Any:
    """The state of `stream` whose next element is the one at `index`.

    `state` is the current one: stages that cannot move by index keep it.

    Raises:
        IndexError: for an index past the end of the dataset read.
        NotImplementedError: for a pipeline whose position is not one index.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.limit(5, fn.from_dataset(fn.range(10)))
        >>> at_next_index(stream, stream.init(), 3)
        LimitState(taken=3, parent=DatasetPosition(position=3))
    """
    return _rule(stream)[1](stream, state, index)


def _rule(stream: Any) -> tuple[Get, Set]:
    if isinstance(stream, FromDatasetStream):
        return _position
    if stream.transparent and len(stream.parents) == 1:  # mp_prefetch, timing: same state
        return RULES[NextIndexRule.PARENT]
    if stream.next_index_rule is None:
        raise NotImplementedError(
            f"get_next_index and set_next_index cannot express the position of the stage "
            f"{stream.describe_stage()!r} as one index; use get_state and set_state."
        )
    return RULES[stream.next_index_rule]


def _dataset_position(stream: FromDatasetStream[Any], index: int) -> DatasetPosition:
    if index > stream.dataset.length:
        raise IndexError(
            f"index {index} is past the end of the dataset read, of length {stream.dataset.length}."
        )
    return DatasetPosition(index)


def _only_dataset(stream: Any, what: str) -> Any:
    """The one dataset of an interleave, as a stream: Grain's rule for its index."""
    if stream.count != 1:
        raise NotImplementedError(
            f"{what} is not supported for an Interleave of {stream.count} datasets "
            f"({stream.describe_stage()}): each of them has its own position, so there is no one "
            "index (Grain supports an interleave of one dataset only, too); use get_state and "
            "set_state."
        )
    return stream.stream_at(0)


def _interleave_get(stream: Any, state: InterleaveState) -> int:
    dataset = _only_dataset(stream, "get_next_index")
    (slot,) = state.components
    return next_index(dataset, slot.parent)  # at its end too (Grain's is 0 again then)


def _interleave_set(stream: Any, state: InterleaveState, index: int) -> InterleaveState:
    dataset = _only_dataset(stream, "set_next_index")
    (slot,) = state.components
    parent = at_next_index(dataset, slot.parent, index)
    return InterleaveState(0, 1, (InterleaveSlot(0, False, parent),))  # read on, even if ended


_position: tuple[Get, Set] = (
    lambda stream, state: state.position,
    lambda stream, state, index: _dataset_position(stream, index),
)

RULES: dict[NextIndexRule, tuple[Get, Set]] = {
    NextIndexRule.PARENT: (
        lambda stream, state: next_index(stream.parents[0], state),
        lambda stream, state, index: at_next_index(stream.parents[0], state, index),
    ),
    NextIndexRule.COUNTER: (
        lambda stream, state: next_index(stream.parent, state.parent),
        lambda stream, state, index: type(state)(
            index, at_next_index(stream.parent, state.parent, index)
        ),
    ),
    NextIndexRule.BATCH: (
        lambda stream, state: -(-next_index(stream.parent, state) // stream.batch_size),
        lambda stream, state, index: at_next_index(stream.parent, state, index * stream.batch_size),
    ),
    NextIndexRule.INTERLEAVE: (_interleave_get, _interleave_set),
}
"""How the index crosses a stage, by its `next_index_rule`: `(get, set)` for every member."""
