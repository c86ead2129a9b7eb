"""zip: the i-th elements of several datasets or streams, together in one tuple.

A zipped dataset has the length of its shortest component; epoch `e` of the
zip reads epoch `e` of every component (their first `length` positions), so
components of equal length are read at the very index asked for. A zipped
stream yields tuples until the first component ends; with `strict`, a
component that ends before or after the others is an error, as in Python's
`zip(..., strict=True)`.

A None (filtered-out position) inside a component stays in the tuple: the
tuple itself is an element, as in Grain.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, overload

import numpy as np

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_data_list
from grainfn._src.core.dataset import INFINITE, Dataset, set_length
from grainfn._src.core.grain_state import (
    Beneath,
    GrainState,
    OwnGrainState,
    read_components,
    read_field,
    write_components,
)
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.index import slicing


@records.register
class ZipState(NamedTuple):
    """State of a stream `zip`: whether it has ended, and each component's state."""

    stopped: bool
    components: tuple[Any, ...]


def zip_indices(indices: np.ndarray, length: int, parent_length: int) -> np.ndarray:
    """Maps positions of a zip of `length` to positions of a component of `parent_length`.

    Position `i` lies in epoch `e, j = divmod(i, length)` and reads position
    `j` of the component's epoch `e`; an infinite component is read at `i`.

    Args:
        indices: Positions >= 0, a numpy integer array.
        length: Length of the zip (its shortest component), >= 1.
        parent_length: Length of the component, >= `length`.

    Returns:
        Component positions, int64, in the shape of `indices`.

    Examples:
        >>> zip_indices(np.arange(7), 3, 5).tolist()
        [0, 1, 2, 5, 6, 7, 10]
        >>> zip_indices(np.arange(4), 2, 2).tolist()
        [0, 1, 2, 3]
    """
    indices = np.asarray(indices, dtype=np.int64)
    if parent_length == length or parent_length >= INFINITE:
        return indices
    epoch, offset = np.divmod(indices, length)
    return epoch * parent_length + offset


ZIP = RandomStage("zip", (ArgumentKind.COMPONENTS,), (("strict", ArgumentKind.FLAG),), drawn=False)
"""How random pipelines hold a zip, of datasets or of streams: a head they do not draw
(its tuples are no element the stages after it take)."""


@dataclasses.dataclass(frozen=True, repr=False)
class ZippedDataset(Dataset[tuple[Any, ...]]):
    """Tuples of the components' elements, as long as the shortest component."""

    device_refusal = "zip has no device form yet; map over one dataset that holds both"
    random_stage = ZIP

    spec_rule = SpecRule.ZIPPED

    components: tuple[Dataset[Any], ...]

    def __post_init__(self) -> None:
        set_length(self, min(c.length for c in self.components))

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return self.components

    def _get(self, index: int) -> tuple[Any, ...]:
        indices = np.array([index], dtype=np.int64)
        try:
            return self._get_many(indices)[0]
        except Exception:  # read each component alone: its error names its position
            for component in self.components:
                component._get(int(zip_indices(indices, self.length, component.length)[0]))
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        largest = int(indices.max())
        columns = []
        for component in self.components:
            if component.length < INFINITE:
                slicing.check_addressable(largest, self.length, component.length)
            keys = zip_indices(indices, self.length, component.length)
            columns.append(component._get_many(keys))
        return list(builtins.zip(*columns))

    def describe_stage(self) -> str:
        return f"zip({len(self.components)} datasets)"


def _read_grain_state(stream: ZippedStream, grains: Any, path: str, beneath: Beneath) -> ZipState:
    """Grain's `{"parents"}`: each component's state."""
    parents = read_field(grains, "parents", path)
    return ZipState(False, read_components(stream.components, parents, path, beneath))


def _write_grain_state(
    stream: ZippedStream, record: ZipState, path: str, beneath: Beneath
) -> dict[str, Any]:
    return {"parents": write_components(stream.components, record.components, path, beneath)}


@dataclasses.dataclass(frozen=True, repr=False)
class ZippedStream(Stream[tuple[Any, ...]]):
    """Tuples of the components' next elements, until the first component ends.

    With `strict`, raises ValueError where a component ends before or after
    the others, after the last full tuple.
    """

    spec_rule = SpecRule.ZIPPED
    random_stage = ZIP
    grain_state: ClassVar[GrainState | None] = OwnGrainState(
        "ZipIterDataset", _read_grain_state, _write_grain_state
    )

    components: tuple[Stream[Any], ...]
    strict: bool = False

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.components

    def init(self) -> ZipState:
        return ZipState(False, tuple(c.init() for c in self.components))

    def open(self, state: ZipState) -> Cursor:
        cursors = [c.open(s) for c, s in builtins.zip(self.components, state.components)]
        return _ZipCursor(cursors, state.stopped, self.strict)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, ZipState, self.describe_stage(), path)
        check_components(self.components, state.components, path)

    def describe_stage(self) -> str:
        strict = ", strict=True" if self.strict else ""
        return f"zip({len(self.components)} streams{strict})"


def check_components(streams: Sequence[Stream[Any]], states: Any, path: str) -> None:
    """Raises ValueError unless `states` is a tuple of one valid state per stream."""
    where = f"{path}.components" if path else "components"
    if not isinstance(states, tuple) or len(states) != len(streams):
        raise ValueError(
            f"State field {where} must hold {len(streams)} component states, "
            f"got {records.describe_value(states)}."
        )
    for i, (stream, sub) in enumerate(builtins.zip(streams, states)):
        stream.check_state(sub, f"{where}[{i}]")


class _ZipCursor(BaseCursor):
    def __init__(self, cursors: list[Cursor], stopped: bool, strict: bool) -> None:
        self.cursors, self.stopped, self.strict = cursors, stopped, strict

    def next(self) -> tuple[Any, ...]:
        if self.stopped:
            raise StopIteration
        items = []
        for position, cursor in enumerate(self.cursors):
            try:
                items.append(cursor.next())
            except StopIteration:
                if self.strict:
                    self._check_all_ended(position)
                self.stopped = True
                raise
        return tuple(items)

    def _check_all_ended(self, position: int) -> None:
        if position > 0:
            raise ValueError(
                f"zip(strict=True): component {position} ended before components 0 to "
                f"{position - 1}. Zip streams of equal length, or pass strict=False to stop "
                "at the shortest."
            )
        for later in range(1, len(self.cursors)):
            try:
                self.cursors[later].next()
            except StopIteration:
                continue
            raise ValueError(
                f"zip(strict=True): component {later} goes on after component 0 ended. Zip "
                "streams of equal length, or pass strict=False to stop at the shortest."
            )

    def state(self) -> ZipState:
        return ZipState(self.stopped, tuple(c.state() for c in self.cursors))

    def children(self) -> tuple[Cursor, ...]:
        return tuple(self.cursors)


@overload
def zip(data: Sequence[Dataset[Any]], *, strict: bool = False) -> Dataset[tuple[Any, ...]]: ...


@overload
def zip(data: Sequence[Stream[Any]], *, strict: bool = False) -> Stream[tuple[Any, ...]]: ...


def zip(data: Sequence[Data], *, strict: bool = False) -> Data:
    """Tuples of the i-th elements of several datasets, or of several streams.

    Datasets zip into a dataset as long as the shortest (epoch `e` reads the
    first positions of epoch `e` of each); streams zip into a stream that ends
    with its shortest component. With `strict`, components of different
    lengths are a ValueError, as in Python's `zip(..., strict=True)`.

    Args:
        data: A non-empty list of datasets, or of streams.
        strict: Whether the components must have equal lengths.

    Returns:
        A dataset of tuples, or a stream of tuples.

    Examples:
        >>> from grainfn.fn import from_dataset, iterate, range, source
        >>> zip([range(3), source("abcd")]).get_many([0, 1, 2, 3])
        [(0, 'a'), (1, 'b'), (2, 'c'), (0, 'a')]
        >>> list(iterate(zip([from_dataset(range(3)), from_dataset(source("ab"))])))
        [(0, 'a'), (1, 'b')]
    """
    if isinstance(data, Mapping):
        raise TypeError(
            f"zip takes a list of datasets or streams, got a {type(data).__name__} with keys "
            f"{sorted(map(str, data))}. Zip a list and map the tuples to dicts if needed."
        )
    components = as_data_list(data, "zip")
    strict = validate.check_flag(strict, "zip strict")
    if all(isinstance(c, Dataset) for c in components):
        lengths = [c.length for c in components]
        if strict and any(length != lengths[0] for length in lengths):
            raise ValueError(
                f"zip(strict=True) needs datasets of equal length, got lengths {lengths}. Slice "
                "them to a common length first, or pass strict=False to zip to the shortest."
            )
        return ZippedDataset(components)
    if all(isinstance(c, Stream) for c in components):
        return ZippedStream(components, strict)
    raise TypeError(
        "zip takes all datasets or all streams, got "
        f"{[type(c).__name__ for c in components]}; read the datasets as streams with "
        "fn.from_dataset first."
    )
