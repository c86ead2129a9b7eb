"""Leaf datasets: integer ranges and random-access sources."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from grainfn._src.dataset import Dataset, function_name, set_length


@dataclasses.dataclass(frozen=True, repr=False)
class RangeDataset(Dataset[int]):
    """The integers of `range(start, stop, step)`, repeated every epoch."""

    start: int
    stop: int
    step: int

    def __post_init__(self) -> None:
        set_length(self, len(range(self.start, self.stop, self.step)))

    def _get(self, index: int) -> int:
        return self.start + (index % self.length) * self.step

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        values = self.start + (indices % self.length) * self.step
        return values.tolist()

    def describe_stage(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"


@dataclasses.dataclass(frozen=True, repr=False)
class SourceDataset(Dataset[Any]):
    """The items of a random-access source: a Sequence or anything with `len` and `[]`.

    A source that reads many items at once faster than one by one can offer a
    `__getitems__(indices)` method (Grain's data sources do); it is used for
    blocks of positions.
    """

    source: Any

    def __post_init__(self) -> None:
        set_length(self, len(self.source))

    def _get(self, index: int) -> Any:
        return self.source[index % self.length]

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        positions = (indices % self.length).tolist()
        read_many = _batched_reader(self.source)
        if read_many is not None:
            return list(read_many(positions))
        return list(map(self.source.__getitem__, positions))

    def describe_stage(self) -> str:
        return f"source({function_name(self.source)}, length {self.length})"


def _batched_reader(source: Any) -> Callable[[list[int]], Any] | None:
    reader = getattr(source, "__getitems__", None)
    return reader if callable(reader) else None


def check_source(source: Any) -> Any:
    """Checks that `source` supports `len(source)` and `source[i]`."""
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise TypeError(
            f"A source must support len() and [] (a Sequence or a random-access data "
            f"source), got {source!r} of type {type(source).__name__}."
        )
    return source
