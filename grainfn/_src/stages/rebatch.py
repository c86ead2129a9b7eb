"""rebatch: cut a stream of batches into batches of another size.

Every element of the parent is a batch: a pytree (dicts, lists, tuples,
namedtuples; None is an empty subtree) whose leaves share a leading batch
dimension. The rows of consecutive parent batches are regrouped into batches
of `batch_size` rows, as Grain's `RebatchIterDataset` does: a new batch
made of one piece is that piece (a slice of the parent's leaves), one made of
several is their `np.concatenate`. The last batch is shorter unless
`drop_remainder`.

A batch is complete before it is yielded, so between elements the only thing
to remember is where the next row is: the state is the parent's state before
the parent batch that holds it and the row's offset in that batch (offset 0
with the parent's current state when a parent batch is used up). Resuming
inside a parent batch reads it again.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, NamedTuple

import numpy as np
import toolz

from grainfn._src.core import pytree, validate
from grainfn._src.core import state as records
from grainfn._src.core.arguments import Data, as_stream
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream, Stream


@records.register
class RebatchState(NamedTuple, Generic[records.Parent]):
    """State of `rebatch`: the next row's offset in its parent batch, and the state before it."""

    offset: int
    parent: records.Parent


def slice_rows(tree: Any, start: int, stop: int) -> Any:
    """`leaf[start:stop]` for every leaf of `tree`, keeping its structure.

    Examples:
        >>> slice_rows({"x": np.arange(4), "y": (np.zeros((4, 2)),)}, 1, 3)
        {'x': array([1, 2]), 'y': (array([[0., 0.],
               [0., 0.]]),)}
    """
    if tree is None:
        return None
    if isinstance(tree, dict):
        return {key: slice_rows(value, start, stop) for key, value in tree.items()}
    if pytree.is_namedtuple(tree):
        return type(tree)(*(slice_rows(value, start, stop) for value in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(slice_rows(value, start, stop) for value in tree)
    return tree[start:stop]


def concatenate_rows(pieces: list[Any], path: str = "") -> Any:
    """Concatenates same-structure pytrees leaf by leaf along the first axis.

    Raises:
        ValueError: naming the path where two pieces differ in structure.

    Examples:
        >>> concatenate_rows([{"x": np.arange(2)}, {"x": np.arange(3)}])
        {'x': array([0, 1, 0, 1, 2])}
    """
    first = pieces[0]
    for piece in pieces[1:]:
        if not _same_node(first, piece):
            where = f"at {path}" if path else "at the top level"
            raise ValueError(
                f"rebatch cannot join parent batches of different structure {where}: "
                f"{pytree.describe_node(first)} and {pytree.describe_node(piece)}. Every parent "
                "batch needs the same structure."
            )
    if first is None:
        return None
    if isinstance(first, dict):
        return {k: concatenate_rows([p[k] for p in pieces], f"{path}[{k!r}]") for k in first}
    if isinstance(first, (list, tuple)):
        joined = [
            concatenate_rows([p[i] for p in pieces], f"{path}[{i}]") for i in range(len(first))
        ]
        return type(first)(*joined) if pytree.is_namedtuple(first) else type(first)(joined)
    return np.concatenate(pieces, axis=0)


def batch_rows(batch: Any) -> int:
    """The number of rows of a parent batch: the leading dimension all its leaves share.

    Raises:
        ValueError: if the batch has no leaves, a leaf has no leading
            dimension, leaves disagree on it, or it is 0.

    Examples:
        >>> batch_rows({"x": np.zeros((3, 2)), "y": np.arange(3)})
        3
    """
    found = pytree.leaves(batch, "A batch to rebatch")
    if not found:
        raise ValueError(
            f"rebatch needs batches with at least one array leaf, got {validate.short_repr(batch)}."
        )
    sizes = []
    for leaf in found:
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(
                f"rebatch needs every leaf to have a leading batch dimension, but a leaf is "
                f"{records.describe_value(leaf)}. Batch the elements first (batch(n))."
            )
        sizes.append(shape[0])
    if any(size != sizes[0] for size in sizes):
        raise ValueError(
            f"rebatch needs the leaves of a batch to share their leading dimension, got "
            f"leading dimensions {sizes}."
        )
    if sizes[0] == 0:
        raise ValueError("rebatch cannot read a parent batch of 0 rows; drop empty batches first.")
    return int(sizes[0])


@dataclasses.dataclass(frozen=True, repr=False)
class RebatchedStream(OneParentStream[Any, RebatchState[Any]]):
    """The rows of the parent's batches, regrouped into batches of `batch_size` rows."""

    spec_rule = SpecRule.REBATCHED
    grain_state = GrainKeys("RebatchIterDataset", RebatchState, (("batch_idx", "offset"),))

    batch_size: int
    drop_remainder: bool = False

    def init(self) -> RebatchState:
        return RebatchState(0, self.parent.init())

    def open(self, state: RebatchState) -> Cursor:
        return _RebatchCursor(self.parent.open(state.parent), state, self)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, RebatchState, self.describe_stage(), path)
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")

    def describe_stage(self) -> str:
        drop = ", drop_remainder=True" if self.drop_remainder else ""
        return f"rebatch({self.batch_size}{drop})"

    def grain_record(self, read: RebatchState, path: str) -> RebatchState:
        # Grain names the parent's state before the batch being cut and the next row in it; once
        # that batch is used up, the row is its length: grainfn names the state after it, row 0.
        if not read.offset:
            return read
        self.parent.check_state(read.parent, f"{path}.parent")
        cursor = self.parent.open(read.parent)
        try:
            batch = next(iter(cursor.next_many(1)), None)
            after = cursor.state()
        finally:
            cursor.close()
        rows = -1 if batch is None else batch_rows(batch)
        if read.offset > rows:
            raise ValueError(
                f"Grain's {path}.batch_idx is {read.offset}, but the parent's batch there has "
                f"{max(rows, 0)} rows: it is the state of another pipeline, or the data changed."
            )
        return RebatchState(0, after) if read.offset == rows else read


class _RebatchCursor(BaseCursor):
    """Cuts pieces from `batch` (a parent batch of `rows` rows) from row `offset` on."""

    def __init__(self, parent: Cursor, state: RebatchState, stage: RebatchedStream) -> None:
        self.parent = parent
        self.size, self.drop = stage.batch_size, stage.drop_remainder
        self.before = state.parent  # the parent's state before `batch`
        self.batch: Any = None
        self.rows = self.offset = 0
        if state.offset:
            if not self._read():
                raise ValueError(
                    f"State says row {state.offset} of a parent batch is next, but the parent "
                    "has no batch left; this state belongs to another pipeline."
                )
            if state.offset >= self.rows:
                raise ValueError(
                    f"State says row {state.offset} of a parent batch is next, but the batch "
                    f"has {self.rows} rows; this state belongs to another pipeline."
                )
            self.offset = state.offset

    def _read(self) -> bool:
        """Reads the next parent batch; False if there is none."""
        self.before = self.parent.state()
        try:
            batch = self.parent.next()
        except StopIteration:
            self.batch, self.rows, self.offset = None, 0, 0
            return False
        self.batch, self.rows, self.offset = batch, batch_rows(batch), 0
        return True

    def next(self) -> Any:
        needed = self.size
        pieces = []
        while needed:
            if self.offset >= self.rows and not self._read():
                break
            take = min(needed, self.rows - self.offset)
            pieces.append(slice_rows(self.batch, self.offset, self.offset + take))
            self.offset += take
            needed -= take
        if not pieces or (needed and self.drop):
            raise StopIteration
        return pieces[0] if len(pieces) == 1 else concatenate_rows(pieces)

    def state(self) -> RebatchState:
        if self.offset >= self.rows:  # the parent batch is used up (or none is read)
            return RebatchState(0, self.parent.state())
        return RebatchState(self.offset, self.before)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


def _same_node(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys()
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b)
    return not isinstance(b, (dict, list, tuple))


@toolz.curry
def rebatch(batch_size: int, stream: Data, *, drop_remainder: bool = False) -> Stream[Any]:
    """The rows of a stream's batches (a dataset's, read in order), regrouped by `batch_size`.

    A batch is a pytree whose leaves share a leading dimension (the output of
    `batch`). Rows run on across parent batches; the last batch is shorter
    unless `drop_remainder`. Equal to Grain's `RebatchIterDataset`.

    Examples:
        >>> from grainfn.fn import batch, from_dataset, iterate, range
        >>> stream = batch(4, from_dataset(range(10)))
        >>> [b.tolist() for b in iterate(rebatch(3, stream))]
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """
    batch_size = validate.check_positive_int(batch_size, "rebatch batch_size", validate.INT64_MAX)
    return RebatchedStream(
        as_stream(stream, "rebatch"),
        batch_size,
        validate.check_flag(drop_remainder, "rebatch drop_remainder"),
    )
