"""The `shuffle` stage: a new pseudorandom permutation of a dataset in every epoch."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core.arguments import as_dataset, op_seed
from grainfn._src.core.dataset import Dataset, IndexStage
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.index import slicing
from grainfn._src.index.device_ints import Split, parent_bound, require
from grainfn._src.index.shuffle import shuffle_index, shuffle_indices
from grainfn._src.index.shuffle_jax import permute_jax

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class ShuffledDataset(IndexStage[T]):
    """A new pseudorandom permutation of the parent in every epoch."""

    random_stage = RandomStage(
        "shuffle", keywords=(("seed", ArgumentKind.OPTIONAL_SEED),), in_grain=True
    )

    seed: int

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        slicing.check_addressable(int(indices.max()), self.length, self.length)
        return shuffle_indices(indices, self.length, self.seed)

    def parent_index(self, index: int) -> int:
        slicing.check_addressable(index, self.length, self.length)
        return shuffle_index(index, self.length, self.seed)

    def describe_stage(self) -> str:
        return f"shuffle(seed={self.seed})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        length, seed = self.length, np.uint32(self.seed)
        require(
            length - 1 < compiler.mode.limit,
            self.describe_stage(),
            f"it permutes {length} positions",
            compiler.mode,
        )
        parent = compiler.compile(self.parent, parent_bound(length, bound, length))

        def move(arrays: Sequence[Any], at: Split) -> Split:
            seeds = at.epoch.astype(np.uint32) + seed  # (seed + epoch) mod 2**32, as on the host
            return Split(at.epoch, permute_jax(at.offset, length, seeds))

        return parent.at(move)


@toolz.curry
def shuffle(ds: Dataset[T], *, seed: int | None = None) -> Dataset[T]:
    """A new pseudorandom permutation of `ds` in every epoch.

    The permutation is computed per index in O(1) memory, for any length up to
    2**63 - 1, and is the same as Grain's for the same seed.

    Examples:
        >>> from grainfn import fn
        >>> ds = shuffle(fn.range(5), seed=1)
        >>> sorted(ds.get_many(range(5)))
        [0, 1, 2, 3, 4]
    """
    ds = as_dataset(ds, "shuffle")
    return ShuffledDataset(ds, op_seed(seed, ds, "shuffle"))
