"""The `seed` stage: seeds the random stages downstream that have no seed of their own."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.dataset import IndexStage
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Cursor, PassThroughStream, Stream

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class SeededDataset(IndexStage[T]):
    """Passes elements through and seeds the random stages downstream of it."""

    random_stage = RandomStage("seed", (ArgumentKind.SEED,), in_grain=True, leads=True)
    takes_wide_offsets = True  # its device form takes Wide offsets

    seed: int

    @property
    def pipeline_seed(self) -> int | None:
        return self.seed

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        return indices

    def parent_index(self, index: int) -> int:
        return index

    def describe_stage(self) -> str:
        return f"seed({self.seed})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        return compiler.compile(self.parent, bound)


@dataclasses.dataclass(frozen=True, repr=False)
class SeededStream(PassThroughStream):
    """Passes elements through and seeds the random stages downstream of it."""

    spec_rule = SpecRule.PARENT
    next_index_rule = NextIndexRule.PARENT
    random_stage = RandomStage("seed", (ArgumentKind.SEED,), in_grain=True, leads=True)

    seed: int

    @property
    def pipeline_seed(self) -> int | None:
        return self.seed

    def open(self, state: Any) -> Cursor:
        return self.parent.open(state)

    def describe_stage(self) -> str:
        return f"seed({self.seed})"


@toolz.curry
def seed(seed: int, data: Data) -> Data:
    """Seeds every random stage downstream that has no explicit seed.

    Each such stage derives its own seed from `seed` and its distance from this
    stage, exactly as Grain does.

    Examples:
        >>> from grainfn import fn
        >>> a = fn.shuffle(seed(0, fn.range(100)))
        >>> b = fn.shuffle(seed(0, fn.range(100)))
        >>> a.get_many(range(5)) == b.get_many(range(5))
        True
    """
    checked = validate.check_seed(seed)
    if isinstance(data, Stream):
        return SeededStream(data, checked)
    return SeededDataset(as_dataset(data, "seed"), checked)
