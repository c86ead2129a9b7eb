"""Map-level stages that only move indices: seed, shuffle, slice, repeat, mix, concatenate.

Each stage maps an output index to parent indices with the pure functions of
`grainfn._src.index`, over a whole block of positions at once in `_get_many`.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from grainfn._src.dataset import INFINITE, Dataset, OneParent, ParentIndex, set_length
from grainfn._src.index import mixing, shuffle, slicing, windows


@dataclasses.dataclass(frozen=True, repr=False)
class SeededDataset(OneParent):
    """Passes elements through and seeds the random stages downstream of it."""

    seed: int

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    @property
    def pipeline_seed(self) -> int | None:
        return self.seed

    def _get(self, index: int) -> Any:
        return self.parent._get(index)

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        return self.parent._get_many(indices)

    def describe_stage(self) -> str:
        return f"seed({self.seed})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


@dataclasses.dataclass(frozen=True, repr=False)
class ShuffledDataset(OneParent):
    """A new pseudorandom permutation of the parent in every epoch."""

    seed: int

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def _get(self, index: int) -> Any:
        slicing.check_addressable(index, self.length, self.length)
        return self.parent._get(shuffle.shuffle_index(index, self.length, self.seed))

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        slicing.check_addressable(int(indices.max()), self.length, self.length)
        return self.parent._get_many(shuffle.shuffle_indices(indices, self.length, self.seed))

    def describe_stage(self) -> str:
        return f"shuffle(seed={self.seed})"

    def trace_parent(self, index: int) -> ParentIndex:
        slicing.check_addressable(index, self.length, self.length)
        return ParentIndex(0, shuffle.shuffle_index(index, self.length, self.seed))


@dataclasses.dataclass(frozen=True, repr=False)
class WindowShuffledDataset(OneParent):
    """A new permutation inside each window of `window_size` positions of every epoch."""

    window_size: int
    seed: int

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def _get(self, index: int) -> Any:
        return self._get_many(np.array([index], dtype=np.int64))[0]

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        slicing.check_addressable(int(indices.max()), self.length, self.length)
        parent_indices = windows.window_shuffle_indices(
            indices, self.length, self.window_size, self.seed
        )
        return self.parent._get_many(parent_indices)

    def describe_stage(self) -> str:
        return f"window_shuffle({self.window_size}, seed={self.seed})"

    def trace_parent(self, index: int) -> ParentIndex:
        slicing.check_addressable(index, self.length, self.length)
        indices = np.array([index], dtype=np.int64)
        parent_indices = windows.window_shuffle_indices(
            indices, self.length, self.window_size, self.seed
        )
        return ParentIndex(0, int(parent_indices[0]))


@dataclasses.dataclass(frozen=True, repr=False)
class SlicedDataset(OneParent):
    """The parent's positions `start, start + step, ...`, epoch by epoch."""

    start: int
    step: int
    size: int

    def __post_init__(self) -> None:
        set_length(self, self.size)

    def _get(self, index: int) -> Any:
        slicing.check_addressable(index, self.length, self.parent.length)
        return self.parent._get(
            slicing.slice_indices(index, self.start, self.step, self.size, self.parent.length)
        )

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        slicing.check_addressable(int(indices.max()), self.length, self.parent.length)
        return self.parent._get_many(
            slicing.slice_indices(indices, self.start, self.step, self.size, self.parent.length)
        )

    def describe_stage(self) -> str:
        stop = self.start + self.size * self.step
        return f"slice(start={self.start}, stop={stop}, step={self.step})"

    def trace_parent(self, index: int) -> ParentIndex:
        slicing.check_addressable(index, self.length, self.parent.length)
        parent_length = self.parent.length
        key = slicing.slice_indices(index, self.start, self.step, self.size, parent_length)
        return ParentIndex(0, int(key))


@dataclasses.dataclass(frozen=True, repr=False)
class TakenDataset(OneParent):
    """The parent's positions listed in `positions`, epoch by epoch."""

    positions: tuple[int, ...]

    def __post_init__(self) -> None:
        set_length(self, len(self.positions))

    def _get(self, index: int) -> Any:
        slicing.check_addressable(index, self.length, self.parent.length)
        epoch, offset = divmod(index, self.length)
        return self.parent._get(self.positions[offset] + epoch * self.parent.length)

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        slicing.check_addressable(int(indices.max()), self.length, self.parent.length)
        table = np.asarray(self.positions, dtype=np.int64)
        return self.parent._get_many(slicing.take_indices(indices, table, self.parent.length))

    def describe_stage(self) -> str:
        return f"slice(positions of length {self.length})"

    def trace_parent(self, index: int) -> ParentIndex:
        slicing.check_addressable(index, self.length, self.parent.length)
        table = np.asarray(self.positions, dtype=np.int64)
        key = slicing.take_indices(np.array([index], dtype=np.int64), table, self.parent.length)
        return ParentIndex(0, int(key[0]))


@dataclasses.dataclass(frozen=True, repr=False)
class RepeatedDataset(OneParent):
    """The parent repeated `num_epochs` times (None: forever)."""

    num_epochs: int | None
    reseed_each_epoch: bool = True

    def __post_init__(self) -> None:
        parent_length = self.parent.length
        if self.num_epochs is None:
            set_length(self, INFINITE if parent_length else 0)
        else:
            set_length(self, min(INFINITE, self.num_epochs * parent_length))

    def _get(self, index: int) -> Any:
        parent_length = self.parent.length
        return self.parent._get(
            slicing.repeat_indices(index, parent_length, self.reseed_each_epoch)
        )

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        parent_length = self.parent.length
        return self.parent._get_many(
            slicing.repeat_indices(indices, parent_length, self.reseed_each_epoch)
        )

    def describe_stage(self) -> str:
        epochs = "forever" if self.num_epochs is None else f"{self.num_epochs} epochs"
        reseed = "" if self.reseed_each_epoch else ", same epoch each time"
        return f"repeat({epochs}{reseed})"

    def trace_parent(self, index: int) -> ParentIndex:
        key = slicing.repeat_indices(index, self.parent.length, self.reseed_each_epoch)
        return ParentIndex(0, int(key))


@dataclasses.dataclass(frozen=True, repr=False)
class _Selection(Dataset[Any]):
    """Base of stages that route each position to one of several components."""

    components: tuple[Dataset[Any], ...]

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return self.components

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _get(self, index: int) -> Any:
        component, key = self._route(np.array([index], dtype=np.int64))
        return self.components[int(component[0])]._get(int(key[0]))

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        which, keys = self._route(indices)
        return gather(self.components, which, keys)

    def trace_parent(self, index: int) -> ParentIndex:
        component, key = self._route(np.array([index], dtype=np.int64))
        return ParentIndex(int(component[0]), int(key[0]))


def gather(components: Sequence[Dataset[Any]], which: np.ndarray, keys: np.ndarray) -> list[Any]:
    """Reads `components[which[j]]` at `keys[j]` for every j, one block call per component."""
    if len(components) == 1:
        return components[0]._get_many(keys)
    # Group positions by component (stable, so each component reads its keys in
    # order), read each group in one call, then put the elements back in place
    # with one C-level gather instead of a Python loop over elements.
    order = np.argsort(which, kind="stable")
    grouped: list[Any] = []
    start = 0
    for component, count in enumerate(np.bincount(which, minlength=len(components)).tolist()):
        if count:
            grouped.extend(components[component]._get_many(keys[order[start : start + count]]))
            start += count
    if len(grouped) == 1:
        return grouped
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return list(operator.itemgetter(*inverse.tolist())(grouped))


@dataclasses.dataclass(frozen=True, repr=False)
class MixedDataset(_Selection):
    """Interleaves components in fixed proportions; ends where the first runs out."""

    weights: tuple[float, ...]
    proportions: tuple[int, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        proportions = mixing.int_proportions(self.weights)
        object.__setattr__(self, "proportions", proportions)
        set_length(self, mixing.mix_length([c.length for c in self.components], proportions))

    def _get(self, index: int) -> Any:
        component, key = mixing.mix_index(index, self.proportions)
        return self.components[component]._get(key)

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return mixing.mix_indices(indices, self.proportions)

    def describe_stage(self) -> str:
        return f"mix(weights={list(self.weights)})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(*mixing.mix_index(index, self.proportions))


@dataclasses.dataclass(frozen=True, repr=False)
class ConcatenatedDataset(_Selection):
    """Components one after another; epoch e reads epoch e of each."""

    def __post_init__(self) -> None:
        set_length(self, sum(c.length for c in self.components))

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        longest = max(c.length for c in self.components)
        slicing.check_addressable(int(indices.max()), self.length, longest)
        return mixing.concat_indices(indices, [c.length for c in self.components])

    def describe_stage(self) -> str:
        return f"concatenate({len(self.components)} datasets)"


@dataclasses.dataclass(frozen=True, repr=False)
class SelectedDataset(_Selection):
    """Components chosen by a selection map: position -> (component, index)."""

    selection_map: Any

    def __post_init__(self) -> None:
        set_length(self, len(self.selection_map))

    def _get(self, index: int) -> Any:
        component, key = self._select(index)
        return self.components[component]._get(key)

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [self._select(i) for i in indices.tolist()]
        which = np.fromiter((c for c, _ in pairs), dtype=np.int64, count=len(pairs))
        keys = np.fromiter((k for _, k in pairs), dtype=np.int64, count=len(pairs))
        return which, keys

    def _select(self, index: int) -> tuple[int, int]:
        component, key = self.selection_map[index]
        if not 0 <= component < len(self.components) or key < 0:
            raise IndexError(
                f"selection_map[{index}] returned ({component}, {key}); it must return "
                f"(dataset index in [0, {len(self.components)}), index >= 0)."
            )
        return int(component), int(key)

    def describe_stage(self) -> str:
        return f"select_from_datasets({type(self.selection_map).__name__})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(*self._select(index))
