"""The `slice` stage: positions picked by a Python slice or by a table of indices."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_dataset
from grainfn._src.core.dataset import Dataset, IndexStage, set_length
from grainfn._src.index import slicing

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class SlicedDataset(IndexStage[T]):
    """The parent's positions `start, start + step, ...`, epoch by epoch."""

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


@dataclasses.dataclass(frozen=True, repr=False)
class TakenDataset(IndexStage[T]):
    """The parent's positions listed in `positions`, epoch by epoch."""

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
        return SlicedDataset(ds, start, step, size)
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence | np.ndarray):
        raise TypeError(
            f"slice takes a slice or a sequence of integer positions, got {positions!r}."
        )
    table = slicing.index_table(positions, ds.length)
    return TakenDataset(ds, tuple(table.tolist()))
