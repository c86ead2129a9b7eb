"""The `repeat` stage: a dataset's epochs one after another, or a stream restarted."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.dataset import INFINITE, Dataset, IndexStage, set_length
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream, WrappingStream
from grainfn._src.index import slicing
from grainfn._src.index.device_ints import Split, split, whole_position

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class RepeatedDataset(IndexStage[T]):
    """The parent repeated `num_epochs` times (None: forever)."""

    random_stage = RandomStage(
        "repeat",
        (ArgumentKind.OPTIONAL_EPOCHS,),
        (("reseed_each_epoch", ArgumentKind.FLAG),),
        in_grain=True,
    )
    takes_wide_offsets = True  # its device form takes Wide offsets

    num_epochs: int | None
    reseed_each_epoch: bool = True

    def __post_init__(self) -> None:
        parent_length = self.parent.length
        if self.num_epochs is None:
            set_length(self, INFINITE if parent_length else 0)
        else:
            set_length(self, min(INFINITE, self.num_epochs * parent_length))

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        return slicing.repeat_indices(indices, self.parent.length, self.reseed_each_epoch)

    def parent_index(self, index: int) -> int:
        return int(slicing.repeat_indices(index, self.parent.length, self.reseed_each_epoch))

    def describe_stage(self) -> str:
        epochs = "forever" if self.num_epochs is None else f"{self.num_epochs} epochs"
        reseed = "" if self.reseed_each_epoch else ", same epoch each time"
        return f"repeat({epochs}{reseed})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        length, parent_length, mode = self.length, self.parent.length, compiler.mode
        # An endless repeat's positions lie in its epoch 0: with Wide offsets, the offset is all.
        endless = length >= INFINITE and not compiler.wide(self, bound)
        whole = whole_position(mode, self, bound) if endless else (lambda at: at.offset)
        if not self.reseed_each_epoch:  # every repetition reads the parent's first epoch
            parent = compiler.compile(self.parent, min(bound, parent_length - 1))

            def first_epoch(arrays: Sequence[Any], at: Split) -> Split:
                # A finite repeat's epoch is a whole number of parent epochs: the offset decides.
                inside = split(mode, whole(at), parent_length, bound)
                return Split(inside.epoch * mode.unsigned.type(0), inside.offset)

            return parent.at(first_epoch)
        parent = compiler.compile(self.parent, bound)  # the position passes through
        if length < INFINITE:
            times = mode.unsigned.type(length // parent_length % mode.limit)

            def move(arrays: Sequence[Any], at: Split) -> Split:
                inside = split(mode, at.offset, parent_length, bound)
                return Split(at.epoch * times + inside.epoch, inside.offset)

            return parent.at(move)
        return parent.at(lambda arrays, at: split(mode, whole(at), parent_length, bound))


@records.register
class RepeatState(NamedTuple, Generic[records.Parent]):
    """State of `repeat`: the current epoch and the parent's state within it."""

    epoch: int
    parent: records.Parent


def _grain_repeat(grain: Any, num_epochs: int | None, stream: Any) -> Any:
    """A stream repeated with Grain's API, which holds it as a class, not a method."""
    return grain.experimental.RepeatIterDataset(stream, num_epochs)


@dataclasses.dataclass(frozen=True, repr=False)
class RepeatedStream(WrappingStream[Any, RepeatState[Any]]):
    """The parent's elements again and again, `num_epochs` times or forever (None).

    Each repetition restarts the parent from its initial state, so it yields the
    same elements. A repetition that yields nothing ends the stream instead of
    looping forever.
    """

    spec_rule = SpecRule.PARENT
    random_stage = RandomStage(
        "repeat", (ArgumentKind.EPOCHS,), in_grain=True, grain_twin=_grain_repeat
    )

    num_epochs: int | None
    record = RepeatState
    grain_state = GrainKeys("RepeatIterDataset", RepeatState, (("epoch", "epoch"),))

    def check_state(self, state: Any, path: str = "") -> None:
        super().check_state(state, path)
        records.check_at_most(state.epoch, self.num_epochs, path, "epoch", self.describe_stage())

    def open(self, state: RepeatState) -> Cursor:
        return _RepeatCursor(self.parent, state.epoch, state.parent, self.num_epochs)

    def describe_stage(self) -> str:
        return f"repeat({'forever' if self.num_epochs is None else self.num_epochs})"


class _RepeatCursor(BaseCursor):
    def __init__(self, parent: Stream[Any], epoch: int, state: Any, num_epochs: int | None) -> None:
        self.parent, self.epoch, self.num_epochs = parent, epoch, num_epochs
        self.initial = parent.init()
        self.cursor = parent.open(state)
        self.atomic = self.cursor.atomic
        self.fresh = state == self.initial  # this epoch started from the parent's beginning
        self.produced = False

    def next(self) -> Any:
        while self.num_epochs is None or self.epoch < self.num_epochs:
            try:
                element = self.cursor.next()
            except StopIteration:
                if self.fresh and not self.produced:
                    self.epoch = self.num_epochs if self.num_epochs is not None else self.epoch
                    raise
                self.epoch += 1
                self.cursor.close()
                self.cursor = self.parent.open(self.initial)
                self.fresh, self.produced = True, False
                continue
            self.produced = True
            return element
        raise StopIteration

    def state(self) -> Any:
        return RepeatState(self.epoch, self.cursor.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.cursor,)


@toolz.curry
def repeat(num_epochs: int | None, data: Data, *, reseed_each_epoch: bool = True) -> Data:
    """`data` repeated `num_epochs` times, or forever for None.

    A repeated dataset has length `num_epochs * length` (`sys.maxsize` if
    forever) and each repetition is a new epoch (new shuffle, new draws) unless
    `reseed_each_epoch=False`. A repeated stream restarts its parent from the
    initial state, so it yields the same elements each time.

    Examples:
        >>> from grainfn import fn
        >>> repeat(2, fn.range(3)).get_many(range(6))
        [0, 1, 2, 0, 1, 2]
    """
    if isinstance(num_epochs, (Dataset, Stream)):
        raise TypeError(
            "repeat(num_epochs, data) takes the data last; "
            "use repeat(None, data) to repeat forever."
        )
    if num_epochs is not None:
        num_epochs = validate.check_positive_int(num_epochs, "num_epochs", validate.INT64_MAX)
    reseed_each_epoch = validate.check_flag(reseed_each_epoch, "repeat reseed_each_epoch")
    if isinstance(data, Stream):
        if not reseed_each_epoch:
            raise ValueError("reseed_each_epoch applies to datasets; a repeated stream restarts.")
        return RepeatedStream(data, num_epochs)
    ds = as_dataset(data, "repeat")
    if ds.length >= INFINITE:
        raise ValueError(f"Cannot repeat an infinite dataset:\n{ds!r}")
    if num_epochs is not None and num_epochs * ds.length >= INFINITE:
        raise ValueError(
            f"Cannot repeat a dataset of length {ds.length} {num_epochs} times: that makes "
            f"{num_epochs * ds.length} positions, past the 2**63 - 2 a finite dataset may "
            "have. Repeat it forever with num_epochs=None instead."
        )
    return RepeatedDataset(ds, num_epochs, reseed_each_epoch)
