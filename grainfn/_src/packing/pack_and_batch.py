"""Pack-and-batch: elements packed first-fit into the rows of fixed-size batches.

The stage behind Grain's legacy `PackAndBatchOperation`. A batch has
`batch_size` rows; for each leaf of `length_struct` a row holds that many
cells. Elements (trees of arrays with `length_struct`'s structure) are read
in order, each into the first row where every one of its leaves still fits
(and, with `max_sequences_per_bin`, that holds fewer elements than that),
until one fits no row: the batch comes out and that element starts the next
one. A batch is the tuple `(data, segment_ids, positions)`, three trees of
`length_struct`'s structure whose leaves have shapes `(batch_size, T, ...)`,
`(batch_size, T)` and `(batch_size, T)`; rows no element went into are zeros.

Placement is the first-fit `Block` of `grainfn._src.packing.bins`; the arrays
are made by `tile_rows` and `fill` of `grainfn._src.packing.arrays`. The state
holds no data: the batches yielded, and the parent's state before the next
batch's first element, from which resuming reads that batch again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset, function_name
from grainfn._src.core.reading import as_stream
from grainfn._src.core.stream import BaseCursor, Cursor, Stream, WrappingStream
from grainfn._src.packing.arrays import Pieces, fill, tile_rows
from grainfn._src.packing.bins import Block, as_sequence
from grainfn._src.packing.spec import PackSpec
from grainfn._src.packing.trees import collect, positive_leaves, rebuild, where


@dataclasses.dataclass(frozen=True)
class PackAndBatchSpec:
    """What a pack-and-batch stage packs. Build one with `pack_and_batch_spec`.

    Attributes:
        length_struct: The structure of the elements, each leaf the row length of its array.
        batch_size: The rows of a batch.
        max_sequences_per_bin: The most elements one row takes, or None.
        names: Each leaf's path in `length_struct` (`['inputs']`), in leaf order.
        lengths: Each leaf's row length, in leaf order.
        keys: For a flat dict `length_struct`, its sorted keys; else None.
    """

    length_struct: Any
    batch_size: int
    max_sequences_per_bin: int | None
    names: tuple[str, ...]
    lengths: tuple[int, ...]
    keys: tuple[Any, ...] | None

    def stage_line(self) -> str:
        """The stage this spec configures, with its arguments, as one line."""
        limit = self.max_sequences_per_bin
        extra = "" if limit is None else f", max_sequences_per_bin={limit}"
        return f"pack_and_batch({self.length_struct!r}, batch_size={self.batch_size}{extra})"

    def block(self) -> Block:
        """An empty batch to place elements into (their leaves as dicts keyed by `names`)."""
        limit, rows = self.max_sequences_per_bin, self.batch_size
        spec = PackSpec("first_fit", self.names, self.lengths, rows, max_sequences_per_bin=limit)
        return Block(spec)

    def leaves_of(self, element: Any) -> dict[str, np.ndarray]:
        """The element's arrays keyed by `names`, each with a leading length axis.

        Raises:
            ValueError: if the element's structure is not `length_struct`'s, or
                an array is longer than its row.
        """
        keys = self.keys
        if keys is not None and isinstance(element, Mapping) and len(element) == len(keys):
            try:
                values = [element[key] for key in keys]
            except KeyError:
                values = self._walk(element)
        else:
            values = self._walk(element)
        out = {}
        for name, length, value in zip(self.names, self.lengths, values):
            if type(value) is not np.ndarray or not value.ndim:
                if value is None or isinstance(value, Mapping):
                    self._walk(element)  # raises, naming where
                value = as_sequence(value)
            if value.shape[0] > length:
                raise ValueError(
                    f"Inputs to PackAndBatchOperation must be truncated to their row length: "
                    f"element{name} has length {value.shape[0]}, more than "
                    f"length_struct{name} = {length}. Truncate it first, e.g. with a map."
                )
            out[name] = value
        return out

    def _walk(self, element: Any) -> list[Any]:
        found: list[Any] = []
        collect(self.length_struct, element, (), found)
        return found

    def packed(self, block: Block) -> tuple[Any, Any, Any]:
        """The batch of `block`'s elements: `(data, segment_ids, positions)`."""
        count, features = len(block.rows), len(self.lengths)
        order = np.argsort(np.array(block.rows), kind="stable")  # by row, in placement order
        rows = np.array(block.rows)[order]
        sizes = np.array(block.sizes).reshape(count, features)[order]
        pieces = _with_empty_rows(
            tile_rows(rows, sizes, self.lengths, (1,) * features),
            self.batch_size - block.open,
            self.lengths,
        )
        columns = list(zip(*[block.elements[k] for k in order.tolist()]))
        arrays = [
            fill(columns[i], pieces, i, self.batch_size, length, None, name)
            for i, (name, length) in enumerate(zip(self.names, self.lengths))
        ]
        data, segment_ids, positions = zip(*arrays)
        return (
            rebuild(self.length_struct, iter(data)),
            rebuild(self.length_struct, iter(segment_ids)),
            rebuild(self.length_struct, iter(positions)),
        )


def _with_empty_rows(pieces: Pieces, count: int, lengths: tuple[int, ...]) -> Pieces:
    """`pieces` followed by `count` rows of padding only: a batch's rows no element went into."""
    if not count:
        return pieces
    return Pieces(
        np.concatenate([pieces.elements, np.full(count, -1, np.int64)]),
        np.concatenate([pieces.sizes, np.tile(np.array(lengths, np.int64), (count, 1))]),
        np.concatenate([pieces.segments, np.zeros(count, np.int32)]),
    )


def pack_and_batch_spec(
    length_struct: Any, batch_size: int, max_sequences_per_bin: int | None = None
) -> PackAndBatchSpec:
    """Checks Grain's `PackAndBatchOperation` arguments and returns them as a spec.

    Raises:
        TypeError, ValueError: naming the bad argument and what is allowed.

    Examples:
        >>> spec = pack_and_batch_spec({"targets": 4, "inputs": 6}, 2)
        >>> spec.names, spec.lengths, spec.keys
        (("['inputs']", "['targets']"), (6, 4), ('inputs', 'targets'))
        >>> pack_and_batch_spec({"inputs": [4, None]}, 2)
        Traceback (most recent call last):
        ...
        TypeError: length_struct['inputs'][1] must be a positive int, got None (NoneType); ...
    """
    paths = positive_leaves(
        length_struct,
        (),
        "length_struct is a dict, list, tuple or namedtuple nesting of positive ints (one per "
        "array to pack), or one int.",
    )
    if not paths:
        raise ValueError(f"length_struct must have at least one leaf, got {length_struct!r}.")
    if max_sequences_per_bin is not None:
        max_sequences_per_bin = validate.check_positive_int(
            max_sequences_per_bin, "max_sequences_per_bin"
        )
    flat = isinstance(length_struct, dict) and all(len(path) == 1 for path, _ in paths)
    return PackAndBatchSpec(
        length_struct=length_struct,
        batch_size=validate.check_positive_int(batch_size, "batch_size", validate.INT64_MAX),
        max_sequences_per_bin=max_sequences_per_bin,
        names=tuple(where(path) for path, _ in paths),
        lengths=tuple(length for _, length in paths),
        keys=tuple(path[0] for path, _ in paths) if flat else None,
    )


@records.register
class PackAndBatchState(NamedTuple, Generic[records.Parent]):
    """State of a pack-and-batch stage.

    Attributes:
        emitted: How many batches were yielded.
        parent: The parent's state before the next batch's first element.
    """

    emitted: int
    parent: records.Parent


@dataclasses.dataclass(frozen=True, repr=False)
class PackAndBatchStream(WrappingStream[Any, PackAndBatchState[Any]]):
    """The parent's elements packed into batches. Build one with `pack_and_batch`.

    Attributes:
        spec: What is packed and how.
        data_of: Gives the tree to pack from a parent element; None: the element itself.
        wrap: `wrap(last element, batch)` is what the stage yields for a batch
            whose last element (in input order) is `last element`; None: the batch.
    """

    record = PackAndBatchState

    spec: PackAndBatchSpec
    data_of: Callable[[Any], Any] | None = None
    wrap: Callable[[Any, Any], Any] | None = None

    def open(self, state: Any) -> Cursor:
        return PackAndBatchCursor(self.parent.open(state.parent), self, state)

    def describe_stage(self) -> str:
        hooks = (("data_of", self.data_of), ("wrap", self.wrap))
        named = "".join(f", {what}={function_name(fn)}" for what, fn in hooks if fn is not None)
        return f"{self.spec.stage_line()[:-1]}{named})"


class PackAndBatchCursor(BaseCursor):
    """Reads elements until one fits no row of the batch; that one starts the next batch."""

    def __init__(self, parent: Cursor, stage: PackAndBatchStream, state: PackAndBatchState) -> None:
        self.parent = parent
        self.spec = stage.spec
        self.data_of = stage.data_of
        self.wrap = stage.wrap
        self.emitted = state.emitted
        self.start = state.parent  # the parent's state before the next batch
        self.carry: tuple[Any, dict[str, np.ndarray]] | None = None  # read past the last batch
        self.next_start = state.parent  # the parent's state before `carry`, or at its end
        self.ended = False  # the parent is exhausted

    def _leaves(self, element: Any) -> dict[str, np.ndarray]:
        return self.spec.leaves_of(element if self.data_of is None else self.data_of(element))

    def next(self) -> Any:
        block, last, parent = self.spec.block(), None, self.parent
        if self.carry is not None:
            last, leaves = self.carry
            self.carry = None
            block.add(leaves)  # an empty batch takes any element that is not too long
        while not self.ended:
            room = block.bins - block.open
            if room:
                # Each element fits a row in use or opens an empty one, so `room`
                # elements cannot end the batch: read them at once.
                elements = parent.next_many(room)
                if len(elements) < room:
                    self.ended, self.next_start = True, parent.state()
                if elements:
                    block.place([self._leaves(e) for e in elements])
                    last = elements[-1]
                continue
            before = parent.state()
            try:
                element = parent.next()
            except StopIteration:
                self.ended, self.next_start = True, parent.state()
                break
            leaves = self._leaves(element)
            if not block.add(leaves):
                self.carry, self.next_start = (element, leaves), before
                break
            last = element
        if last is None:
            raise StopIteration
        batch = self.spec.packed(block)
        self.emitted += 1
        self.start = self.next_start
        return batch if self.wrap is None else self.wrap(last, batch)

    def state(self) -> PackAndBatchState:
        return PackAndBatchState(self.emitted, self.start)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@toolz.curry
def pack_and_batch(
    length_struct: Any,
    batch_size: int,
    data: Stream[Any] | Dataset[Any],
    *,
    max_sequences_per_bin: int | None = None,
    data_of: Callable[[Any], Any] | None = None,
    wrap: Callable[[Any, Any], Any] | None = None,
) -> PackAndBatchStream:
    """Packs elements first-fit into batches of `batch_size` rows, as Grain's PackAndBatchOperation.

    Each element (a tree of arrays with `length_struct`'s structure, every
    array along its first axis) goes into the first row where all its arrays
    fit; when one fits no row, the batch comes out and it starts the next.

    Args:
        length_struct: The elements' structure, each leaf its array's row length.
        batch_size: The rows of a batch.
        data: A stream of elements (a dataset is read in order).
        max_sequences_per_bin: The most elements one row takes; None: no limit.
        data_of: Gives the tree to pack from an element; None: the element.
        wrap: `wrap(last element, batch)` is yielded for each batch; None: the batch.

    Returns:
        A stream of `(data, segment_ids, positions)`: trees of `length_struct`'s
        structure with leaves of shapes `(batch_size, T, ...)` (the dtype of the
        batch's first element, zeros as padding), `(batch_size, T)` and
        `(batch_size, T)` (int32: 1, 2, ... per element of a row and 0, 1, ...
        within an element; 0 on padding).

    Raises:
        TypeError, ValueError: for bad arguments; while reading, for an element
            of another structure or with an array longer than its row.

    Examples:
        >>> from grainfn import fn
        >>> docs = fn.source([{"x": np.arange(1, n + 1)} for n in (3, 2, 4, 2)])
        >>> for data, segment_ids, positions in fn.iterate(pack_and_batch({"x": 5}, 2, docs)):
        ...     print(data["x"].tolist(), segment_ids["x"].tolist())
        [[1, 2, 3, 1, 2], [1, 2, 3, 4, 0]] [[1, 1, 1, 2, 2], [1, 1, 1, 1, 0]]
        [[1, 2, 0, 0, 0], [0, 0, 0, 0, 0]] [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    """
    spec = pack_and_batch_spec(length_struct, batch_size, max_sequences_per_bin)
    for hook, what in ((data_of, "data_of"), (wrap, "wrap")):
        if hook is not None:
            validate.check_callable(hook, what)
    return PackAndBatchStream(as_stream(data, "pack_and_batch"), spec, data_of, wrap)
