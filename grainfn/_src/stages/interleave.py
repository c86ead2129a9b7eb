"""interleave: round robin over `cycle_length` open datasets, opening the next as one ends.

The order is Grain's `InterleaveIterDataset`: slots `0 .. c - 1` (where
`c = min(cycle_length, number of datasets)`) start with datasets `0 .. c - 1`
and are visited in turn, each visit yielding one element of the slot's
dataset. A dataset that runs out leaves its slot empty and the turn passes
on; the next visit to an empty slot opens the next unopened dataset there
and reads from it at once. The stream ends when every slot is empty and no
dataset is left to open.

The datasets are a static sequence (`InterleavedStream`, whose `components`
are streams) or the elements of a dataset (`InterleavedDatasetsStream`), each
a Dataset, a Stream or None (no dataset: read as an empty one). The state
holds one `InterleaveSlot` per slot (the dataset it holds, whether it ran
out, and that dataset's state) and the index of the next dataset to open;
it keeps one shape for the stream's life when every dataset's state has the
same shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, NamedTuple

import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_data_list
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.grain_state import (
    Beneath,
    GrainState,
    OwnGrainState,
    check_count,
    check_flag,
    read_count,
    read_field,
)
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.stages.sources import RangeDataset

EMPTY: Stream[Any] = FromDatasetStream(RangeDataset(0, 0, 1))
"""What a None in a dataset of datasets reads as: a stream with no elements."""


@records.register
class InterleaveSlot(NamedTuple, Generic[records.Parent]):
    """One slot of an `interleave`: the dataset it holds, whether it ran out, and its state."""

    dataset: int
    stopped: bool
    parent: records.Parent


@records.register
class InterleaveState(NamedTuple):
    """State of `interleave`: the slot visited next, the next dataset to open, and the slots."""

    slot: int
    next_dataset: int
    components: tuple[InterleaveSlot, ...]


def stream_or_empty(value: Any, index: int) -> Stream[Any]:
    """Dataset `index` of an interleave as a stream: a Dataset is read in order, None is empty."""
    if isinstance(value, Stream):
        return value
    if isinstance(value, Dataset):
        return FromDatasetStream(value)
    if value is None:
        return EMPTY
    raise TypeError(
        f"interleave reads datasets, but element {index} of the dataset of datasets is "
        f"{records.describe_value(value)}. Map each element to a grainfn Dataset or Stream "
        "(or, in the Grain API, to a MapDataset or IterDataset)."
    )


def read_grain_state(stream: Any, grains: Any, path: str, beneath: Beneath) -> InterleaveState:
    """Grain's interleave state: the slot visited next, the next dataset, and each slot's.

    Each slot's dataset, state and `exhausted` flag; `future_states` (left by
    Grain's elastic `set_shard_states`) must be empty.
    """
    datasets = read_field(grains, "iterators_in_use_indices", path)
    states = read_field(grains, "iterators_in_use_states", path)
    exhausted = read_field(grains, "exhausted", path)
    lists = all(isinstance(value, list) for value in (datasets, states, exhausted))
    if not lists or not len(datasets) == len(states) == len(exhausted) == stream.slots:
        raise ValueError(
            f"Grain's {path} must hold the datasets, states and `exhausted` flags of "
            f"{stream.slots} slots, got {records.describe_value(grains)}."
        )
    if grains.get("future_states"):  # left by Grain's elastic set_shard_states
        raise ValueError(
            f"Grain's {path}.future_states holds the states of datasets this interleave has not "
            f"opened yet ({records.describe_value(grains['future_states'])}); grainfn's "
            "interleave opens each dataset at its start, so this state does not determine "
            "grainfn's. Restart the data position for this pipeline."
        )
    flags = [check_flag(ended, f"{path}.exhausted[{i}]") for i, ended in enumerate(exhausted)]
    for i, dataset in enumerate(datasets):
        where = f"{path}.iterators_in_use_indices[{i}]"
        if check_count(dataset, where) >= stream.count:
            raise ValueError(
                f"Grain's {where} is {dataset}, but this interleave has {stream.count} datasets."
            )
    slots = tuple(
        InterleaveSlot(
            dataset,
            ended,
            beneath(stream.stream_at(dataset), inner, f"{path}.iterators_in_use_states[{i}]"),
        )
        for i, (dataset, inner, ended) in enumerate(zip(datasets, states, flags))
    )
    slot = read_count(grains, "next_index_in_cycle", path)
    return InterleaveState(slot, read_count(grains, "next_index_in_datasets", path), slots)


def write_grain_state(
    stream: Any, record: InterleaveState, path: str, beneath: Beneath
) -> dict[str, Any]:
    """Grain's interleave state at `record` (see `read_grain_state`)."""
    states = [
        beneath(stream.stream_at(slot.dataset), slot.parent, f"{path}.iterators_in_use_states")
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


GRAIN_STATE = OwnGrainState("InterleaveIterDataset", read_grain_state, write_grain_state)
"""How an interleave reads and writes Grain's state of it (Grain's worker order too)."""


class _Interleaved(Stream[Any, InterleaveState]):
    """What both kinds of interleave share: the slots, the state and the cursor."""

    cycle_length: int  # a field of each subclass
    next_index_rule = NextIndexRule.INTERLEAVE  # of one dataset only, as in Grain
    grain_state: ClassVar[GrainState | None] = GRAIN_STATE

    @property
    def count(self) -> int:
        """The number of datasets (`sys.maxsize` for an infinite dataset of datasets)."""
        raise NotImplementedError

    def stream_at(self, index: int) -> Stream[Any]:
        """Dataset `index` as a stream."""
        raise NotImplementedError

    @property
    def slots(self) -> int:
        """The number of datasets open at once: `min(cycle_length, count)`."""
        return min(self.cycle_length, self.count)

    def init(self) -> InterleaveState:
        slots = tuple(InterleaveSlot(i, False, self.stream_at(i).init()) for i in range(self.slots))
        return InterleaveState(0, self.slots, slots)

    def open(self, state: InterleaveState) -> Cursor:
        return _InterleaveCursor(self, state)

    def check_state(self, state: Any, path: str = "") -> None:
        stage = self.describe_stage()
        records.check_record(state, InterleaveState, stage, path)
        where = f"{path}." if path else ""
        if state.slot >= self.slots or not self.slots <= state.next_dataset <= self.count:
            raise ValueError(
                f"State fields {where}slot={state.slot} and {where}next_dataset="
                f"{state.next_dataset} do not fit an interleave of {self.slots} slots over "
                f"{self.count} datasets; this state belongs to another pipeline."
            )
        slots = state.components
        if not isinstance(slots, tuple) or len(slots) != self.slots:
            raise ValueError(
                f"State field {where}components must hold {self.slots} slot states, "
                f"got {records.describe_value(slots)}."
            )
        for i, slot in enumerate(slots):
            slot_path = f"{where}components[{i}]"
            records.check_record(slot, InterleaveSlot, stage, slot_path)
            if slot.dataset >= state.next_dataset:
                raise ValueError(
                    f"State field {slot_path}.dataset is {slot.dataset}, but only datasets "
                    f"below next_dataset={state.next_dataset} have been opened."
                )
            self.stream_at(slot.dataset).check_state(slot.parent, f"{slot_path}.parent")
        if len({slot.dataset for slot in slots}) != len(slots):
            raise ValueError(
                f"State field {where}components holds one dataset in two slots: "
                f"{[slot.dataset for slot in slots]}."
            )


@dataclasses.dataclass(frozen=True, repr=False)
class InterleavedStream(_Interleaved):
    """Round robin over `cycle_length` of the `components` at a time (see the module doc)."""

    spec_rule = SpecRule.PARENT

    components: tuple[Stream[Any], ...]
    cycle_length: int

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.components

    @property
    def count(self) -> int:
        return len(self.components)

    def stream_at(self, index: int) -> Stream[Any]:
        return self.components[index]

    def describe_stage(self) -> str:
        return f"interleave(cycle_length={self.cycle_length}, {self.count} datasets)"


@dataclasses.dataclass(frozen=True, repr=False)
class InterleavedDatasetsStream(_Interleaved):
    """Round robin over `cycle_length` of the datasets that `datasets` holds at a time.

    The inner datasets exist only as elements, made while iterating, so
    `mp_prefetch` reads them here rather than in its workers
    (`reads_in_parent`).
    """

    spec_rule = SpecRule.FIRST_DATASET

    datasets: Dataset[Any]
    cycle_length: int
    reads_in_parent: ClassVar[bool] = True

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.datasets,)

    @property
    def count(self) -> int:
        return self.datasets.length

    def stream_at(self, index: int) -> Stream[Any]:
        return stream_or_empty(self.datasets.get(index), index)

    def describe_stage(self) -> str:
        return f"interleave(cycle_length={self.cycle_length}, the datasets of a dataset)"


class _InterleaveCursor(BaseCursor):
    """Visits the slots in turn; `cursors[s]` is None once slot `s` ran out."""

    def __init__(self, stage: _Interleaved, state: InterleaveState) -> None:
        self.stream_at = stage.stream_at
        self.count = stage.count
        self.slot = state.slot
        self.next_dataset = state.next_dataset
        self.datasets = [slot.dataset for slot in state.components]
        self.final = [slot.parent for slot in state.components]  # the states of ended slots
        self.cursors: list[Cursor | None] = [
            None if slot.stopped else stage.stream_at(slot.dataset).open(slot.parent)
            for slot in state.components
        ]
        self.open_slots = sum(cursor is not None for cursor in self.cursors)
        self.prefetching = False

    def next(self) -> Any:
        cursors = self.cursors
        while True:
            slot = self.slot
            cursor = cursors[slot]
            if cursor is not None:
                try:
                    element = cursor.next()
                except StopIteration:
                    self._retire(slot, cursor)
                else:
                    self.slot = (slot + 1) % len(cursors)
                    return element
            elif self.next_dataset < self.count:
                self._open_next(slot)
                continue
            elif not self.open_slots:
                raise StopIteration
            self.slot = (slot + 1) % len(cursors)

    def _retire(self, slot: int, cursor: Cursor) -> None:
        self.final[slot] = cursor.state()
        cursor.close()
        self.cursors[slot] = None
        self.open_slots -= 1

    def _open_next(self, slot: int) -> None:
        index = self.next_dataset
        stream = self.stream_at(index)
        cursor = stream.open(stream.init())
        if self.prefetching:
            cursor.start_prefetch()
        self.next_dataset = index + 1
        self.datasets[slot] = index
        self.cursors[slot] = cursor
        self.open_slots += 1

    def state(self) -> InterleaveState:
        slots = tuple(
            InterleaveSlot(dataset, True, final)
            if cursor is None
            else InterleaveSlot(dataset, False, cursor.state())
            for dataset, cursor, final in zip(self.datasets, self.cursors, self.final)
        )
        return InterleaveState(self.slot, self.next_dataset, slots)

    def children(self) -> tuple[Cursor, ...]:
        return tuple(cursor for cursor in self.cursors if cursor is not None)

    def start_prefetch(self) -> None:
        self.prefetching = True
        super().start_prefetch()


@toolz.curry
def interleave(cycle_length: int, datasets: Sequence[Data] | Dataset[Any]) -> Stream[Any]:
    """Round robin over `cycle_length` open datasets, opening the next one as one runs out.

    The slots start with the first `cycle_length` datasets and are visited in
    turn, one element per visit. A dataset that runs out leaves its slot empty
    and the turn passes on; the next visit to that slot opens the next dataset
    there. So `cycle_length=1` chains the datasets and a `cycle_length` of at
    least their number takes one element from each in turn. This is the order
    of Grain's `InterleaveIterDataset`.

    Args:
        cycle_length: How many datasets are read at once, >= 1.
        datasets: A non-empty list of datasets and streams (a dataset is read
            in order, as `from_dataset` does), or a dataset whose elements are
            datasets or streams (a None element reads as an empty dataset).

    Returns:
        A stream whose state holds each slot's dataset and state, never data.

    Examples:
        >>> from grainfn.fn import iterate, map, range
        >>> list(iterate(interleave(2, [range(3), range(10, 12), range(20, 23)])))
        [0, 10, 1, 11, 2, 20, 21, 22]
        >>> shards = map(lambda i: range(10 * i, 10 * i + 2), range(3))
        >>> list(iterate(interleave(3, shards)))
        [0, 10, 20, 1, 11, 21]
    """
    cycle_length = validate.check_positive_int(cycle_length, "interleave cycle_length")
    if isinstance(datasets, Dataset):
        if datasets.length == 0:
            raise ValueError(
                "interleave needs at least one dataset, got a dataset of datasets of length 0."
            )
        return InterleavedDatasetsStream(datasets, cycle_length)
    if isinstance(datasets, Stream):
        raise TypeError(
            "interleave reads a list of datasets or a dataset of datasets, not a stream: it "
            "needs to know how many datasets there are. Pass a list or a dataset."
        )
    components = as_data_list(datasets, "interleave")
    streams = tuple(stream_or_empty(c, i) for i, c in enumerate(components))
    return InterleavedStream(streams, cycle_length)
