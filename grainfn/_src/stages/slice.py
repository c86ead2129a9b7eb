"""The `slice` stage: positions picked by a Python slice or by a table of indices."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_dataset
from grainfn._src.core.dataset import Dataset, IndexStage, set_length
from grainfn._src.core.loader_records import WORKER_SHARE
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.index import slicing
from grainfn._src.index.device_ints import Split, parent_bound

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class SlicedDataset(IndexStage[T]):
    """The parent's positions `start, start + step, ...`, epoch by epoch."""

    random_stage = RandomStage("slice", (ArgumentKind.SLICE,), in_grain=True)
    loader_records = WORKER_SHARE  # a Grain worker's share of a DataLoader's records
    logical_shard_cut = True

    start: int
    step: int
    size: int

    def __post_init__(self) -> None:
        set_length(self, self.size)

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        last = int(indices.max())
        if last < self.length:  # all in the first epoch: no division (integer division is slow)
            return self.start + indices * self.step
        slicing.check_addressable(last, self.length, self.parent.length)
        return slicing.slice_indices(indices, self.start, self.step, self.size, self.parent.length)

    def parent_index(self, index: int) -> int:
        slicing.check_addressable(index, self.length, self.parent.length)
        return int(
            slicing.slice_indices(index, self.start, self.step, self.size, self.parent.length)
        )

    def describe_stage(self) -> str:
        stop = self.start + self.size * self.step
        return f"slice(start={self.start}, stop={stop}, step={self.step})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        parent_length = self.parent.length
        start, step = compiler.mode.constant(self.start), compiler.mode.constant(self.step)
        parent = compiler.compile(self.parent, parent_bound(self.length, bound, parent_length))

        def move(arrays: Sequence[Any], at: Split) -> Split:
            # Wrapping arithmetic: exact, since the true result lies in [0, parent_length).
            return Split(at.epoch, start + at.offset * step)

        return parent.at(move)


@dataclasses.dataclass(frozen=True)
class _PositionTable:
    """Positions of one dataset of `length`, epoch by epoch, as a Grain selection map."""

    positions: tuple[int, ...]
    length: int

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: int) -> tuple[int, int]:
        epoch, offset = divmod(index, len(self.positions))
        return 0, self.positions[offset] + epoch * self.length


def _grain_take(grain: Any, positions: list[int], data: Any) -> Any:
    """Positions picked with Grain's API, which has no table of them: its `select_from_datasets`."""
    table = _PositionTable(tuple(positions), len(data))
    return grain.MapDataset.select_from_datasets([data], table)


@dataclasses.dataclass(frozen=True, repr=False)
class PositionsDataset(IndexStage[T]):
    """The parent's positions listed in `positions`, epoch by epoch."""

    random_stage = RandomStage(
        "slice", (ArgumentKind.POSITIONS,), in_grain=True, name="take", grain_twin=_grain_take
    )

    positions: tuple[int, ...]

    def __post_init__(self) -> None:
        set_length(self, len(self.positions))

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        slicing.check_addressable(int(indices.max()), self.length, self.parent.length)
        table = np.asarray(self.positions, dtype=np.int64)
        return slicing.take_indices(indices, table, self.parent.length)

    def parent_index(self, index: int) -> int:
        slicing.check_addressable(index, self.length, self.parent.length)
        epoch, offset = divmod(index, self.length)
        return self.positions[offset] + epoch * self.parent.length

    def describe_stage(self) -> str:
        return f"slice(positions of length {self.length})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        table = compiler.add(np.asarray(self.positions, dtype=compiler.mode.unsigned))
        parent = compiler.compile(self.parent, parent_bound(self.length, bound, self.parent.length))

        return parent.at(lambda arrays, at: Split(at.epoch, arrays[table][at.offset]))


@toolz.curry
def slice(positions: builtins.slice | Sequence[int], ds: Dataset[T]) -> Dataset[T]:
    """The positions of `ds` selected by a Python slice or a sequence of indices.

    Examples:
        >>> from grainfn.fn import range
        >>> slice(builtins.slice(None, None, -2), range(6)).get_many([0, 1, 2])
        [5, 3, 1]
        >>> slice([4, 0], range(6)).get_many([0, 1])
        [4, 0]
    """
    ds = as_dataset(ds, "slice")
    if isinstance(positions, builtins.slice):
        for name in ("start", "stop", "step"):
            value = getattr(positions, name)
            if value is not None and not validate.is_integer(value):
                raise TypeError(
                    f"slice {name} must be an integer or None, got {value!r} of type "
                    f"{type(value).__name__} in {positions!r}."
                )
        if positions.step == 0:
            raise ValueError(f"slice step must not be 0, got {positions!r}.")
        start, step, size = slicing.slice_params(positions, ds.length)
        if abs(step) > validate.INT64_MAX:  # it selects one position at most, so its step
            step = 1  # never applies; and the int64 index math could not hold it
        return SlicedDataset(ds, start, step, size)
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence | np.ndarray):
        raise TypeError(
            f"slice takes a slice or a sequence of integer positions, got {positions!r}."
        )
    table = slicing.index_table(positions, ds.length)
    return PositionsDataset(ds, tuple(table.tolist()))


def sequential_part(sl: builtins.slice, ds: Dataset[T]) -> Dataset[T]:
    """Grain's sequential `set_slice(sl)`: part `sl.start` of `sl.step` contiguous parts of `ds`.

    `slice(i, None, n)` names the worker `i` of `n` (its stop is ignored, as
    in Grain); the part is the one `even_split` gives shard `i` of `n`: nearly
    equal, contiguous, the first `len(ds) % n` parts one position longer.

    Args:
        sl: `slice(part, _, parts)`, with `parts >= 1` and `0 <= part < parts`.
        ds: A dataset of finite length.

    Returns:
        The part, a slice of `ds`.

    Raises:
        TypeError: if `sl` is no slice, or its start or step no integer.
        ValueError: if the step is < 1 or the start outside `[0, step)`.

    Examples:
        >>> from grainfn.fn import range
        >>> sequential_part(builtins.slice(2, None, 3), range(21)).get_many([0, 1, 6])
        [14, 15, 20]
        >>> [sequential_part(builtins.slice(i, None, 3), range(10)).length for i in (0, 1, 2)]
        [4, 3, 3]
    """
    if not isinstance(sl, builtins.slice):
        raise TypeError(f"set_slice takes a slice(part, None, parts), got {sl!r}.")
    parts = validate.check_positive_int(sl.step, f"the step (the number of parts) of {sl!r}")
    part = validate.check_integer(sl.start, f"the start (the part) of {sl!r}")
    if not 0 <= part < parts:
        raise ValueError(
            f"The start (the part) of {sl!r} must be in [0, step) = [0, {parts}), got {part}."
        )
    ds = as_dataset(ds, "set_slice")
    positions = slicing.contiguous_part(ds.length, part, parts)
    return slice(builtins.slice(positions.start, positions.stop), ds)
