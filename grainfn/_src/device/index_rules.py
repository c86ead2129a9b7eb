"""Device rules of the stages that only move positions.

seed, shuffle, window_shuffle, slice and repeat.

Each maps `Split(epoch, offset)` of its own length to the parent's, with the
index functions of `grainfn._src.index`: the same order as the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grainfn._src.core.dataset import INFINITE
from grainfn._src.device.ints import (
    Split,
    parent_bound,
    require,
    split,
    takes_wide_offsets,
    whole_position,
)
from grainfn._src.index.shuffle_jax import permute_jax
from grainfn._src.stages.repeat import RepeatedDataset
from grainfn._src.stages.seed import SeededDataset
from grainfn._src.stages.shuffle import ShuffledDataset
from grainfn._src.stages.slice import SlicedDataset, TakenDataset
from grainfn._src.stages.window_shuffle import WindowShuffledDataset

if TYPE_CHECKING:
    from grainfn._src.device.compiler import Compiler, Program

_SEED_LIMIT = 2**32


@takes_wide_offsets
def seed_rule(c: Compiler, ds: SeededDataset[Any], bound: int) -> Program:
    return c.compile(ds.parent, bound)


def shuffle_rule(c: Compiler, ds: ShuffledDataset[Any], bound: int) -> Program:
    length, seed = ds.length, np.uint32(ds.seed)
    require(
        length - 1 < c.mode.limit,
        ds.describe_stage(),
        f"it permutes {length} positions",
        c.mode,
    )
    parent = c.compile(ds.parent, parent_bound(length, bound, length))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        seeds = at.epoch.astype(np.uint32) + seed  # (seed + epoch) mod 2**32, as on the host
        return parent(arrays, Split(at.epoch, permute_jax(at.offset, length, seeds)))

    return program


def window_shuffle_rule(c: Compiler, ds: WindowShuffledDataset[Any], bound: int) -> Program:
    length, window = ds.length, ds.window_size
    windows_per_epoch = -(-length // window)
    last = length - (windows_per_epoch - 1) * window  # the size of the last window
    unsigned = c.mode.unsigned.type
    parent = c.compile(ds.parent, parent_bound(length, bound, length))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        window_index, inside = at.offset // unsigned(window), at.offset % unsigned(window)
        # seed + epoch * windows_per_epoch + window, mod 2**32: uint32 arithmetic wraps so.
        keys = (
            np.uint32(ds.seed)
            + at.epoch.astype(np.uint32) * np.uint32(windows_per_epoch % _SEED_LIMIT)
            + window_index.astype(np.uint32)
        )
        moved = permute_jax(inside, min(window, length), keys)
        if last != min(window, length):
            is_last = window_index == unsigned(windows_per_epoch - 1)
            # Only in-range inputs: cycle walking from outside [0, last) may never end.
            in_last = _where(is_last, inside, inside * unsigned(0))
            moved = _where(is_last, permute_jax(in_last, last, keys), moved)
        offset = window_index * unsigned(window) + moved
        return parent(arrays, Split(at.epoch, offset))

    return program


def slice_rule(c: Compiler, ds: SlicedDataset[Any], bound: int) -> Program:
    parent_length = ds.parent.length
    start, step = c.mode.constant(ds.start), c.mode.constant(ds.step)
    parent = c.compile(ds.parent, parent_bound(ds.length, bound, parent_length))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        # Wrapping arithmetic: exact, since the true result lies in [0, parent_length).
        return parent(arrays, Split(at.epoch, start + at.offset * step))

    return program


def take_rule(c: Compiler, ds: TakenDataset[Any], bound: int) -> Program:
    table = c.add(np.asarray(ds.positions, dtype=c.mode.unsigned))
    parent = c.compile(ds.parent, parent_bound(ds.length, bound, ds.parent.length))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        return parent(arrays, Split(at.epoch, arrays[table][at.offset]))

    return program


@takes_wide_offsets
def repeat_rule(c: Compiler, ds: RepeatedDataset[Any], bound: int) -> Program:
    length, parent_length = ds.length, ds.parent.length
    # An endless repeat's positions lie in its epoch 0: with Wide offsets, the offset is all.
    endless = length >= INFINITE and not c.wide(ds, bound)
    whole = whole_position(c.mode, ds, bound) if endless else (lambda at: at.offset)
    if not ds.reseed_each_epoch:  # every repetition reads the parent's first epoch
        parent = c.compile(ds.parent, min(bound, parent_length - 1))

        def first_epoch(arrays: Sequence[Any], at: Split) -> Any:
            # A finite repeat's epoch is a whole number of parent epochs: the offset decides.
            inside = split(c.mode, whole(at), parent_length, bound)
            return parent(arrays, Split(inside.epoch * c.mode.unsigned.type(0), inside.offset))

        return first_epoch
    parent = c.compile(ds.parent, bound)  # the position passes through
    if length < INFINITE:
        times = c.mode.unsigned.type(length // parent_length % c.mode.limit)

        def program(arrays: Sequence[Any], at: Split) -> Any:
            inside = split(c.mode, at.offset, parent_length, bound)
            return parent(arrays, Split(at.epoch * times + inside.epoch, inside.offset))

        return program
    return lambda arrays, at: parent(arrays, split(c.mode, whole(at), parent_length, bound))


def _where(condition: Any, a: Any, b: Any) -> Any:
    import jax.numpy as jnp

    return jnp.where(condition, a, b)


RULES: dict[type, Any] = {
    SeededDataset: seed_rule,
    ShuffledDataset: shuffle_rule,
    WindowShuffledDataset: window_shuffle_rule,
    SlicedDataset: slice_rule,
    TakenDataset: take_rule,
    RepeatedDataset: repeat_rule,
}
"""The device rule of each position-moving stage."""
