"""The `window_shuffle` stage: a permutation inside each window of consecutive positions.

On a dataset, each epoch permutes every window anew; on a stream, window `k` of
consecutive elements is permuted with seed `seed + k` (Grain's
`WindowShuffleIterDataset`), and the state holds positions, never the window.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset, op_seed
from grainfn._src.core.dataset import IndexStage
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream, Stream
from grainfn._src.index import slicing, windows
from grainfn._src.index.device_ints import Split, parent_bound
from grainfn._src.index.seeds import SEED_LIMIT
from grainfn._src.index.shuffle import shuffle_indices
from grainfn._src.index.shuffle_jax import permute_jax

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class WindowShuffledDataset(IndexStage[T]):
    """A new permutation inside each window of `window_size` positions of every epoch."""

    # Not in_grain: Grain's WindowShuffleMapDataset reads a short last window into the next
    # epoch (docs/migrating-from-grain.md), so the differential tests leave it out.
    random_stage = RandomStage(
        "window_shuffle", (ArgumentKind.WINDOW,), (("seed", ArgumentKind.OPTIONAL_SEED),)
    )

    window_size: int
    seed: int

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        slicing.check_addressable(int(indices.max()), self.length, self.length)
        return windows.window_shuffle_indices(indices, self.length, self.window_size, self.seed)

    def describe_stage(self) -> str:
        return f"window_shuffle({self.window_size}, seed={self.seed})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        length, window = self.length, self.window_size
        windows_per_epoch = -(-length // window)
        last = length - (windows_per_epoch - 1) * window  # the size of the last window
        unsigned = compiler.mode.unsigned.type
        parent = compiler.compile(self.parent, parent_bound(length, bound, length))

        def move(arrays: Sequence[Any], at: Split) -> Split:
            window_index, inside = at.offset // unsigned(window), at.offset % unsigned(window)
            # seed + epoch * windows_per_epoch + window, mod 2**32: uint32 arithmetic wraps so.
            keys = (
                np.uint32(self.seed)
                + at.epoch.astype(np.uint32) * np.uint32(windows_per_epoch % SEED_LIMIT)
                + window_index.astype(np.uint32)
            )
            moved = permute_jax(inside, min(window, length), keys)
            if last != min(window, length):
                is_last = window_index == unsigned(windows_per_epoch - 1)
                # Only in-range inputs: cycle walking from outside [0, last) may never end.
                in_last = jnp_where(is_last, inside, inside * unsigned(0))
                moved = jnp_where(is_last, permute_jax(in_last, last, keys), moved)
            return Split(at.epoch, window_index * unsigned(window) + moved)

        return parent.at(move)


@records.register
class WindowShuffleState(NamedTuple, Generic[records.Parent]):
    """State of a stream `window_shuffle`: window number, elements yielded, state at its start."""

    window: int
    emitted: int
    parent: records.Parent


def window_order(window: list[Any], seed: int) -> list[Any]:
    """The elements of one window in the order they are yielded.

    Args:
        window: The window's elements in stream order (not empty).
        seed: The window's shuffle seed, in [0, 2**32).

    Returns:
        `[window[perm(p)] for p in reversed(range(len(window)))]`, where `perm`
        is the shuffle bijection of `len(window)` positions keyed by `seed`.

    Examples:
        >>> sorted(window_order(list("abcd"), seed=5))
        ['a', 'b', 'c', 'd']
        >>> window_order(["x"], seed=5)
        ['x']
    """
    size = len(window)
    permutation = shuffle_indices(np.arange(size - 1, -1, -1, dtype=np.int64), size, seed)
    return [window[j] for j in permutation.tolist()]


@dataclasses.dataclass(frozen=True, repr=False)
class WindowShuffledStream(OneParentStream[Any, WindowShuffleState[Any]]):
    """The parent's elements, shuffled within windows of `window_size` (see the module doc)."""

    spec_rule = SpecRule.PARENT
    grain_state = GrainKeys(
        "WindowShuffleIterDataset",
        WindowShuffleState,
        (("window_index", "window"), ("pos_in_window", "emitted")),
        parent="parent_window_start_state",
    )

    window_size: int
    seed: int

    def init(self) -> WindowShuffleState:
        return WindowShuffleState(0, 0, self.parent.init())

    def open(self, state: WindowShuffleState) -> Cursor:
        return _WindowCursor(self.parent.open(state.parent), state, self.window_size, self.seed)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, WindowShuffleState, self.describe_stage(), path)
        if state.emitted >= self.window_size:
            where = f"{path}.emitted" if path else "emitted"
            raise ValueError(
                f"State field {where} is {state.emitted}, but a window holds at most "
                f"{self.window_size} elements; this state belongs to another pipeline."
            )
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")
        bound = self.parent.most_delivered(state.parent)  # its state at the window's start
        if bound is not None:
            windows = -(-bound // self.window_size)  # the last window may be short
            records.check_at_most(state.window, windows, path, "window", "the parent's state")

    def most_delivered(self, state: WindowShuffleState) -> int:
        return state.window * self.window_size + state.emitted

    def describe_stage(self) -> str:
        return f"window_shuffle({self.window_size}, seed={self.seed})"

    def grain_record(self, read: WindowShuffleState, path: str) -> WindowShuffleState:
        # Once a window's last element is out, Grain's state still names that window's start
        # and its size, with `window_index` already the next window's.
        if not read.emitted:
            return read
        after = self._after_window(read.parent, read.emitted, f"{path}.pos_in_window")
        return read if after is None else WindowShuffleState(read.window, 0, after)

    def _after_window(self, start: Any, emitted: int, where: str) -> Any:
        """The parent's record after a window of `emitted` elements from `start`, if it ends there.

        A window ends after `window_size` elements, or where the parent ends. It
        is read once from `start` (as Grain's own restore reads it); None if the
        window goes on.
        """
        if emitted > self.window_size:
            raise ValueError(
                f"Grain's {where} is {emitted}, but a window holds at most {self.window_size} "
                "elements: it is the state of another pipeline."
            )
        self.parent.check_state(start, where.rsplit(".", 1)[0] + ".parent_window_start_state")
        cursor = self.parent.open(start)
        try:
            read = len(cursor.next_many(emitted))
            if read < emitted:
                raise ValueError(
                    f"Grain's {where} is {emitted}, but the parent has {read} elements from the "
                    "window's start: it is the state of another pipeline, or the data changed."
                )
            after = cursor.state()
            ends = emitted == self.window_size or not cursor.next_many(1)
        finally:
            cursor.close()
        return after if ends else None


class _WindowCursor(BaseCursor):
    """Yields `order[taken:]`, the current window in output order, then reads the next one."""

    def __init__(self, parent: Cursor, state: WindowShuffleState, size: int, seed: int) -> None:
        self.parent, self.size, self.seed = parent, size, seed
        self.window = state.window
        self.start = state.parent  # the parent's state before the current window
        self.order: list[Any] = []
        self.taken = 0
        if state.emitted:
            self._fill()
            if state.emitted > len(self.order):
                raise ValueError(
                    f"State says {state.emitted} elements of window {state.window} were "
                    f"yielded, but the window holds {len(self.order)}; this state belongs to "
                    "another pipeline."
                )
            self._take(state.emitted)

    def _fill(self) -> None:
        """Reads the next window; raises StopIteration if the parent has no element left."""
        self.start = self.parent.state()
        window = self.parent.next_many(self.size)
        if not window:
            raise StopIteration
        self.order = window_order(window, (self.seed + self.window) % SEED_LIMIT)
        self.taken = 0

    def _take(self, count: int) -> None:
        self.taken += count
        if self.taken == len(self.order):  # the window is done: the state moves past it
            self.window += 1
            self.order, self.taken = [], 0

    def next(self) -> Any:
        if not self.order:
            self._fill()
        element = self.order[self.taken]
        self._take(1)
        return element

    def next_many(self, count: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < count:
            if not self.order:
                try:
                    self._fill()
                except StopIteration:
                    break
            part = self.order[self.taken : self.taken + count - len(out)]
            out.extend(part)
            self._take(len(part))
        return out

    def state(self) -> WindowShuffleState:
        if self.order:
            return WindowShuffleState(self.window, self.taken, self.start)
        return WindowShuffleState(self.window, 0, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@toolz.curry
def window_shuffle(window_size: int, data: Data, *, seed: int | None = None) -> Data:
    """A new permutation inside each window of `window_size` consecutive positions.

    Elements move at most `window_size - 1` positions, so reads stay local (a
    cheap shuffle for sources that are slow to read at random). On a dataset,
    each epoch draws new permutations and full windows match Grain's
    `WindowShuffleMapDataset`. On a stream, window `k` of consecutive elements
    is permuted with seed `seed + k` and the output equals Grain's
    `WindowShuffleIterDataset`; the state holds positions, never the window.

    Examples:
        >>> from grainfn.fn import range, from_dataset
        >>> ds = window_shuffle(4, range(10), seed=3)
        >>> [sorted(ds.get_many(w)) for w in ([0, 1, 2, 3], [8, 9])]
        [[0, 1, 2, 3], [8, 9]]
        >>> from grainfn.fn import iterate
        >>> out = list(iterate(window_shuffle(4, from_dataset(range(10)), seed=3)))
        >>> sorted(out[:4]), sorted(out[8:])
        ([0, 1, 2, 3], [8, 9])
    """
    window_size = validate.check_positive_int(window_size, "window_size", validate.INT64_MAX)
    if isinstance(data, Stream):
        seed = op_seed(seed, data, "window_shuffle")
        return WindowShuffledStream(data, window_size, seed)
    ds = as_dataset(data, "window_shuffle")
    return WindowShuffledDataset(ds, window_size, op_seed(seed, ds, "window_shuffle"))


def jnp_where(condition: Any, a: Any, b: Any) -> Any:
    """`jax.numpy.where`, imported when a device program is traced."""
    import jax.numpy as jnp

    return jnp.where(condition, a, b)
