"""The packing stream stage: blocks of elements packed into bins, the rows yielded one by one.

A block is read from the parent until an element fits no bin (see
`grainfn._src.packing.bins`); its rows come out in `row_order`, and the
element that did not fit starts the next block. The state holds no data: the
parent's state before the current block's first element, how many of the
block's rows were yielded, and how many rows were yielded in all (which seeds
the row shuffle). Resuming reads the block again from the parent and packs it
again, as Grain does.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, NamedTuple

from grainfn._src.core import state as records
from grainfn._src.core.grain_keys import GrainKeys
from grainfn._src.core.pytree import map_leaves
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream
from grainfn._src.packing.arrays import Memory, row_order
from grainfn._src.packing.bins import Block
from grainfn._src.packing.spec import PackSpec


@records.register
class PackState(NamedTuple):
    """State of a packing stage (first-fit or best-fit).

    Attributes:
        row: How many rows of the current block were yielded (0 between blocks).
        emitted: How many rows were yielded in all.
        parent: The parent's state before the current block's first element.
    """

    row: int
    emitted: int
    parent: Any


@dataclasses.dataclass(frozen=True, repr=False)
class PackedStream(OneParentStream):
    """The parent's elements packed into bins, a block of `spec.num_bins` bins at a time.

    Build one with `first_fit_pack` or `best_fit_pack`.
    """

    spec: PackSpec
    grain_keys = GrainKeys(
        "FirstFitPackIterDataset and BestFitPackIterDataset",
        PackState,
        (("next_row", "row"), ("counter", "emitted")),
    )

    def init(self) -> PackState:
        return PackState(0, 0, self.parent.init())

    def open(self, state: Any) -> Cursor:
        return _PackCursor(self.parent.open(state.parent), self.spec, state)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, PackState, self.describe_stage(), path)
        if state.row > state.emitted:
            where = f"{path}.row" if path else "row"
            raise ValueError(
                f"State field {where} is {state.row}, more than the {state.emitted} rows "
                "emitted in all; this state was not made by a packing stage."
            )
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")

    def describe_stage(self) -> str:
        return self.spec.describe()


class _PackCursor(BaseCursor):
    """Packs a block when its first row is asked for, then hands out its rows."""

    def __init__(self, parent: Cursor, spec: PackSpec, state: PackState) -> None:
        self.parent = parent
        self.spec = spec
        self.start = state.parent  # the parent's state before the current block
        self.row = state.row
        self.emitted = state.emitted
        self.block: list[dict[str, Any]] | None = None  # the current block's rows, in order
        self.carry: Any = None  # read past the current block: the next block's first element
        self.next_start: Any = state.parent  # the parent's state before `carry`
        self.ended = False  # the parent is exhausted
        self.memory = [Memory() for _ in spec.lengths]  # per leaf: buffers of consumed blocks

    def next(self) -> Any:
        block = self.block
        if block is None:
            block = self.block = self._pack()
        element = block[self.row]
        self.row += 1
        self.emitted += 1
        if self.row == len(block):  # the block is done: the state moves to the next
            self.block, self.row, self.start = None, 0, self.next_start
        return element

    def _pack(self) -> list[dict[str, Any]]:
        """The rows of the block that starts at `self.start`, in the order they come out."""
        block = Block(self.spec)
        parent = self.parent
        if self.carry is not None:
            block.add(self.carry)
            self.carry = None
        while not self.ended:
            room = block.bins - block.open
            if room:
                # Each element fits a bin in use or opens an empty one, so `room`
                # elements cannot end the block: read them at once.
                elements = parent.next_many(room)
                if len(elements) < room:
                    self.ended = True
                    self.next_start = parent.state()
                block.place([e for e in elements if e is not None])
                continue
            # Every bin is in use: the element that fits none starts the next block,
            # which starts from the state before it.
            before = parent.state()
            try:
                element = parent.next()
            except StopIteration:
                self.ended = True
                self.next_start = parent.state()
                break
            if element is not None and not block.add(element):
                self.carry, self.next_start = element, before
                break
        if not block.open:
            raise StopIteration
        packed = block.pack(self.memory)
        order = row_order(self.spec, packed, block.open, self.emitted - self.row)
        if self.row >= len(order):
            raise ValueError(
                f"The state says {self.row} rows of the current block were yielded, but the "
                f"block packs into {len(order)} rows: the state belongs to another pipeline "
                "or other data."
            )
        columns: Any = map(list, packed.values())
        if self.spec.trees:  # a nested feature's outputs are trees: split each into rows
            nested, count = self.spec.tree_keys, len(order)
            columns = [
                [map_leaves(operator.itemgetter(i), v) for i in range(count)]
                if k in nested
                else list(v)
                for k, v in packed.items()
            ]
        rows = [dict(zip(packed, row)) for row in zip(*columns)]
        return [rows[i] for i in order]

    def state(self) -> PackState:
        return PackState(self.row, self.emitted, self.start)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)
