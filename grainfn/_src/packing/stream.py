"""The packing stream stage: blocks of elements packed into bins, the rows yielded one by one.

`first_fit_pack` and `best_fit_pack` are its combinators (curried,
configuration first, data last), behind Grain's `FirstFitPackIterDataset` and
`BestFitPackIterDataset`; they yield what Grain yields for the same input.

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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, NamedTuple

import toolz

from grainfn._src.core import state as records
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.pytree import map_leaves
from grainfn._src.core.reading import as_stream
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream, Stream
from grainfn._src.packing.arrays import Memory, row_order
from grainfn._src.packing.bins import Block
from grainfn._src.packing.spec import PackOptions, PackSpec, pack_spec

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11 on
    from typing_extensions import Unpack


@records.register
class PackState(NamedTuple, Generic[records.Parent]):
    """State of a packing stage (first-fit or best-fit).

    Attributes:
        row: How many rows of the current block were yielded (0 between blocks).
        emitted: How many rows were yielded in all.
        parent: The parent's state before the current block's first element.
    """

    row: int
    emitted: int
    parent: records.Parent


@dataclasses.dataclass(frozen=True, repr=False)
class PackedStream(OneParentStream[Any, PackState[Any]]):
    """The parent's elements packed into bins, a block of `spec.num_bins` bins at a time.

    Build one with `first_fit_pack` or `best_fit_pack`.
    """

    spec: PackSpec
    grain_state = GrainKeys(
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
        return self.spec.stage_line()


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


@toolz.curry
def first_fit_pack(
    length_struct: Mapping[str, Any],
    data: Stream[Any] | Dataset[Any],
    *,
    num_packing_bins: int | None = None,
    **options: Unpack[PackOptions],
) -> Stream[dict[str, Any]]:
    """Packs dict elements into rows of `length_struct` cells per feature, first-fit.

    Elements are read into `num_packing_bins` bins, each element into the
    first bin where all its packed features fit, until one fits no bin; the
    bins then come out as rows (shuffled unless `shuffle_bins=False`) and that
    element starts the next block. A packed feature `f` of packed length `T`
    comes out as `f` (shape `(T, ...)`, padded), `f_segment_ids` (1, 2, ... per
    element of the row, 0 on padding) and `f_positions` (0, 1, ... within each
    element), both int32. Features not in `length_struct` or `meta_features`
    are dropped. Output equals Grain's `FirstFitPackIterDataset`.

    A feature of `length_struct` may be a tree (a dict, list or tuple nesting
    of packed lengths): each leaf is packed on its own, with its own capacity
    in the fit check, and the packed value is a tree of that structure (dicts'
    keys sorted). As a meta feature that is what Grain gives; otherwise
    `f_segment_ids` and `f_positions` are trees of the same structure too,
    one per leaf (Grain refuses such a feature). The elements' value of a
    nested feature must have its structure; its dicts may hold other keys,
    which are dropped.

    Args:
        length_struct: A dict from each feature to pack to its packed length,
            or to a tree of packed lengths.
        data: A stream of dicts (a dataset is read in order).
        num_packing_bins: How many bins a block packs into (required).
        **options: The `PackOptions`: `seed` (of the row shuffle of each block),
            `shuffle_bins`, `shuffle_bins_group_by_feature`, `meta_features`,
            `pack_alignment_struct`, `padding_struct`, `max_sequences_per_bin`.

    Returns:
        A stream of packed dicts, with keys sorted.

    Raises:
        ValueError: for a bad option, and while reading for an element longer
            than its packed length or missing a feature.

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> docs = fn.source([{"tokens": np.arange(1, n + 1)} for n in (3, 2, 4, 1)])
        >>> packed = first_fit_pack({"tokens": 5}, docs, num_packing_bins=2, shuffle_bins=False)
        >>> for row in fn.iterate(packed):
        ...     print(row["tokens"], row["tokens_segment_ids"], row["tokens_positions"])
        [1 2 3 1 2] [1 1 1 2 2] [0 1 2 0 1]
        [1 2 3 4 1] [1 1 1 1 2] [0 1 2 3 0]

        A nested feature: its leaves are packed each on its own.

        >>> pairs = fn.source(
        ...     [{"pair": {"q": np.arange(n), "a": np.arange(3 - n)}} for n in (1, 2)])
        >>> (row,) = fn.iterate(
        ...     first_fit_pack({"pair": {"q": 3, "a": 3}}, pairs, num_packing_bins=1))
        >>> row["pair"]["q"], row["pair_segment_ids"]["a"]
        (array([0, 0, 1]), array([1, 1, 2], dtype=int32))
    """
    return _packed("first_fit", length_struct, data, num_packing_bins, options)


@toolz.curry
def best_fit_pack(
    length_struct: Mapping[str, Any],
    data: Stream[Any] | Dataset[Any],
    *,
    num_packing_bins: int | None = None,
    **options: Unpack[PackOptions],
) -> Stream[dict[str, Any]]:
    """Packs dict elements like `first_fit_pack`, each into the fullest bin where it fits.

    A bin's fullness is the sum over packed features (over every leaf of a
    nested one) of the cells it uses; ties go to the first bin. Output
    equals Grain's `BestFitPackIterDataset`. Arguments are those of
    `first_fit_pack`.

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> docs = fn.source([{"tokens": np.arange(1, n + 1)} for n in (3, 4, 1, 2)])
        >>> packed = best_fit_pack({"tokens": 5}, docs, num_packing_bins=2, shuffle_bins=False)
        >>> [row["tokens_segment_ids"].tolist() for row in fn.iterate(packed)]
        [[1, 1, 1, 2, 2], [1, 1, 1, 1, 2]]
    """
    return _packed("best_fit", length_struct, data, num_packing_bins, options)


def _packed(
    strategy: str,
    length_struct: Mapping[str, Any],
    data: Any,
    num_packing_bins: int | None,
    options: PackOptions,
) -> PackedStream:
    what = f"{strategy}_pack"
    if num_packing_bins is None:
        raise TypeError(
            f"{what} needs num_packing_bins=N, the number of bins a block packs into "
            "(Grain's argument of the same name)."
        )
    stream = as_stream(data, what)
    return PackedStream(stream, pack_spec(strategy, length_struct, num_packing_bins, **options))
