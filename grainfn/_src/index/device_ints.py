"""Integer modes of device index math, and the (epoch, offset) form of positions.

JAX computes with 32-bit integers unless `jax_enable_x64` is on. A position of
a stage of length `n` is carried on device as `Split(epoch, offset)`, with
`position = epoch * n + offset` and `offset < n`, both unsigned. Most stages map
epoch `e` of themselves to epoch `e` of their parent, so offsets stay below the
lengths and the epoch is only needed modulo 2**32 (it seeds shuffles and random
draws): whole pipelines are exact in 32 bits although the positions they reach
deep down do not fit in 32 bits. The few computations that need a whole
position are checked ahead of time against `bound`, the largest position a
stage can be asked for, and refused when they cannot be exact.

Offsets of a long stage (an endless repeat or mix, or a batch of one) can pass
2**32 - 1 with 32-bit integers. There they are `Wide` pairs of words
(`grainfn._src.index.wide`), decided ahead of time by `wide_offsets`; the
stages marked `takes_wide_offsets` compute on them, and any other stage with
such offsets is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from grainfn._src.index.slicing import MAX_POSITION
from grainfn._src.index.wide import Wide, split_wide, widen


class Split(NamedTuple):
    """A position of a stage of length `n` as `epoch * n + offset`, unsigned jax scalars."""

    epoch: Any
    offset: Any


@dataclasses.dataclass(frozen=True)
class IntMode:
    """The integers device index math runs in: 32-bit, or 64-bit under `jax_enable_x64`.

    Attributes:
        bits: 32 or 64.
    """

    bits: int

    @property
    def position_dtype(self) -> np.dtype[Any]:
        """The signed dtype of positions and states: int32 or int64."""
        return np.dtype(np.int32 if self.bits == 32 else np.int64)

    @property
    def unsigned(self) -> np.dtype[Any]:
        """The unsigned dtype index math runs in: uint32 or uint64."""
        return np.dtype(np.uint32 if self.bits == 32 else np.uint64)

    @property
    def top(self) -> int:
        """The largest position a caller can pass: the position dtype's maximum."""
        return int(np.iinfo(self.position_dtype).max)

    @property
    def limit(self) -> int:
        """One more than the largest unsigned value: what wrapping arithmetic reduces by."""
        return 1 << self.bits

    def constant(self, value: int) -> Any:
        """`value` modulo 2**bits as an unsigned numpy scalar (exact wrapping arithmetic)."""
        return self.unsigned.type(value % self.limit)


def current_mode() -> IntMode:
    """The mode jax computes in now (`jax_enable_x64` on: 64-bit)."""
    import jax

    return IntMode(64 if jax.dtypes.canonicalize_dtype(np.int64) == np.int64 else 32)


class UnrepresentableError(OverflowError):
    """A device computation that cannot be exact in the current integer mode."""


def require(fits: bool, stage: str, what: str, mode: IntMode) -> None:
    """Raises `UnrepresentableError` unless `fits`, naming the stage, overflow and way out."""
    if fits:
        return
    if mode.bits == 32:
        remedy = (
            "Enable 64-bit integers with jax.config.update('jax_enable_x64', True) "
            "(or inside the jax.enable_x64(True) context) before calling to_jax."
        )
    else:
        remedy = "This passes 2**64, beyond what the host computes either."
    raise UnrepresentableError(
        f"to_jax cannot compute {stage} exactly with {mode.bits}-bit integers: {what}. {remedy}"
    )


def wide_offsets(mode: IntMode, length: int, bound: int) -> bool:
    """Whether offsets of a stage of `length` asked up to `bound` are carried as `Wide` pairs."""
    return offset_bound(length, bound) >= mode.limit


def split(mode: IntMode, position: Any, length: int, bound: int) -> Split:
    """`position` (<= bound) of a stage of `length` in (epoch, offset) form.

    `position` is an unsigned value of the mode, or a `Wide` pair (32-bit
    mode, where it can pass 2**32 - 1). The offset comes as the stage takes
    it: a `Wide` pair where `wide_offsets(mode, length, bound)`, else unsigned;
    the epoch is taken modulo 2**32 past it.
    """
    wide = wide_offsets(mode, length, bound)
    if isinstance(position, Wide):
        if length >= MAX_POSITION:  # endless: every position lies in epoch 0
            return Split(position.low * mode.unsigned.type(0), position if wide else position.low)
        if bound >= mode.limit:
            epoch, offset = split_wide(position, length)
            return Split(epoch, offset if wide else offset.low)
        position = position.low  # statically below 2**32: the high word is 0
    zero = position * mode.unsigned.type(0)
    if bound < length or length >= mode.limit:  # a value below `length`: epoch 0
        return Split(zero, widen(position) if wide else position)
    n = mode.unsigned.type(length)
    return Split(position // n, position % n)


def epoch_bound(length: int, bound: int) -> int:
    """The largest epoch of a stage of `length` asked for positions up to `bound`."""
    return bound // length if length else 0


def parent_bound(length: int, bound: int, parent_length: int) -> int:
    """The largest parent position a stage reaches that reads epoch `e` of its parent in epoch `e`.

    Examples:
        >>> parent_bound(5, 12, 10)  # positions up to 12 reach epoch 2: parent up to 29
        29
    """
    return min(MAX_POSITION, (epoch_bound(length, bound) + 1) * parent_length - 1)


def offset_bound(length: int, bound: int) -> int:
    """The largest offset (position within its epoch) of a stage asked up to `bound`."""
    return min(length - 1, bound)


def whole_position(mode: IntMode, ds: Any, bound: int) -> Callable[[Split], Any]:
    """`Split -> epoch * length + offset` for stage `ds`: exact, or refused ahead of time.

    Raises:
        UnrepresentableError: if positions up to `bound` do not fit the mode's unsigned integers.
    """
    if bound < ds.length:  # statically in epoch 0
        return lambda at: at.offset
    require(bound < mode.limit, ds.describe_stage(), f"its positions reach {bound}", mode)
    scale = mode.constant(ds.length)
    return lambda at: at.epoch * scale + at.offset
