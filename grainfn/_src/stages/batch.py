"""The `batch` stage: consecutive elements stacked leaf by leaf, and `batch_and_pad`."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import toolz

from grainfn._src.core import pytree as tree
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.compiler import NotOnDeviceError, Program
from grainfn._src.core.dataset import (
    INFINITE,
    OneParent,
    ParentIndex,
    function_name,
    read_each,
    set_length,
    upstream_holes,
)
from grainfn._src.core.loader_records import IN_EACH_WORKER, LoaderRecords
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream, state_of
from grainfn._src.index import slicing, wide
from grainfn._src.index.device_ints import Split, parent_bound, wide_offsets

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler

T = TypeVar("T")


def _batches_after(batched: BatchedDataset, taken: int) -> int:
    """The batches once `taken` elements of the parent are read: only the last may be short."""
    size = batched.batch_size
    if taken % size and taken != batched.parent.length:
        raise ValueError(
            f"Grain's DataLoader state names record {taken}, inside a batch of {size}: "
            "it is the state of another loader."
        )
    return min(math.ceil(taken / size), batched.length)  # a dropped remainder is no batch


def _elements_before(batched: BatchedDataset, position: int) -> int:
    """The parent's elements read up to batch `position` (`_batches_after`'s inverse)."""
    return min(position * batched.batch_size, batched.parent.length)


@dataclasses.dataclass(frozen=True, repr=False)
class BatchedDataset(OneParent):
    """Consecutive elements of each epoch, batched; epochs are batched separately."""

    spec_rule = SpecRule.BATCHED
    random_stage = RandomStage(
        "batch",
        (ArgumentKind.BATCH_SIZE,),
        (("drop_remainder", ArgumentKind.DROP_REMAINDER),),
        in_grain=True,
    )
    takes_wide_offsets = True  # its device form takes Wide offsets
    loader_records = LoaderRecords(
        any_workers=False, position_after=_batches_after, parent_position=_elements_before
    )

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None
    sort_keys: bool = False

    def __post_init__(self) -> None:
        parent_length = self.parent.length
        if self.drop_remainder:
            set_length(self, parent_length // self.batch_size)
        else:
            set_length(self, -(-parent_length // self.batch_size))

    def _bounds(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parent_length = self.parent.length
        slicing.check_addressable(int(indices.max()), self.length, parent_length)
        epoch, offset = np.divmod(indices, self.length)
        start = offset * self.batch_size
        # parent_length - start cannot overflow where start + batch_size can.
        size = np.minimum(self.batch_size, parent_length - start)
        first = start + epoch * parent_length
        return first, first + size

    def _get(self, index: int) -> Any:
        indices = np.array([index], dtype=np.int64)
        try:
            return self._get_many(indices)[0]
        except Exception:  # read the parent one position at a time: its error names one
            starts, stops = self._bounds(indices)
            read_each(self.parent, np.arange(int(starts[0]), int(stops[0]), dtype=np.int64))
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        starts, stops = self._bounds(indices)
        sizes = stops - starts
        positions = _parent_positions(starts, stops, sizes)
        if self.batch_fn is None:
            stacked = self.parent._get_array(positions)
            if stacked is not None:  # all the rows stacked at once: cut into batches
                batches = tree.split_stacked(stacked, sizes)
                return [sorted_keys(b, b) for b in batches] if self.sort_keys else batches
            elements = self.parent._get_many(positions)
            batches = tree.stack_runs(elements, sizes)
            if not self.sort_keys:
                return batches
            firsts = (np.cumsum(sizes) - sizes).tolist()
            return [sorted_keys(b, elements[first]) for b, first in zip(batches, firsts)]
        make, elements = self.batch_fn, self.parent._get_many(positions)
        runs = list(zip(indices.tolist(), sizes.tolist(), np.cumsum(sizes).tolist()))
        try:
            return [make(elements[e - s : e]) for _, s, e in runs]
        except Exception as error:  # batch_fn is the user's: name the batch it fails on
            for index, s, e in runs:  # a pure batch_fn fails again on the same batch
                self._make(elements[e - s : e], index)
            where = f"one of the {len(runs)} batches from position {runs[0][0]}"
            validate.note_user_error(error, self.describe_stage(), where)
            raise

    def _make(self, values: list[Any], index: int) -> Any:
        assert self.batch_fn is not None
        try:
            return self.batch_fn(values)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def describe_stage(self) -> str:
        return _describe(self.batch_size, self.drop_remainder, self.batch_fn, self.sort_keys)

    def trace_parent(self, index: int) -> ParentIndex:
        """The first parent index of the batch, and the batch's size."""
        starts, stops = self._bounds(np.array([index], dtype=np.int64))
        return ParentIndex(0, int(starts[0]), int(stops[0] - starts[0]))

    @property
    def vmap_width(self) -> int:
        return self.batch_size  # its device form reads its rows under one jax.vmap

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        """The whole batch at a position: a `BatchProgram`, which also reads some of its rows."""
        import jax

        size, parent_length = self.batch_size, self.parent.length
        if self.batch_fn is not None:
            raise NotOnDeviceError(
                f"to_jax cannot run {self.describe_stage()!r}: its batch_fn "
                f"({function_name(self.batch_fn)}) takes a Python list of elements. A device batch "
                "stacks them; drop batch_fn."
            )
        if parent_length < INFINITE and parent_length % size and not self.drop_remainder:
            raise NotOnDeviceError(
                f"to_jax cannot run {self.describe_stage()!r}: the last batch of each epoch holds "
                f"{parent_length % size} of {size} elements, and a device batch has one shape. "
                "Pass drop_remainder=True."
            )
        epoch, offset = divmod(bound, self.length) if bound >= self.length else (0, bound)
        last_row = epoch * parent_length + (offset + 1) * size - 1  # of the last batch it may read
        row_bound = min(last_row, parent_bound(self.length, bound, parent_length))
        parent = compiler.compile(self.parent, row_bound)
        unsigned = compiler.mode.unsigned.type
        wide_rows = wide_offsets(compiler.mode, parent_length, row_bound)

        def resolve_rows(arrays: Sequence[Any], at: Split, rows: Any) -> Any:
            if wide_rows:  # 32-bit, rows past 2**32 - 1: offset * size + row on pairs of words
                first = wide.scale(at.offset, size)
                offsets: Any = wide.add(first.high, first.low, rows)
            else:
                offsets = at.offset * unsigned(size) + rows
            return jax.vmap(lambda offset: parent.resolve(arrays, Split(at.epoch, offset)))(offsets)

        def read(arrays: Sequence[Any], where: Any) -> Any:
            return jax.vmap(lambda one: parent.read(arrays, one))(where)

        every_row = np.arange(size, dtype=compiler.mode.unsigned)
        return BatchProgram(
            lambda arrays, at: resolve_rows(arrays, at, every_row),
            read,
            resolve_rows,
            size,
            compiler.mode.unsigned,
        )


@dataclasses.dataclass(frozen=True)
class BatchProgram(Program):
    """A batch stage's device form: the whole batch at a position, and `rows` for some rows.

    `to_jax` compiles a batch stage once; this one program gives the whole
    batch, and any rows of it (one device's part of a global batch) from the
    same arrays and index math, so the rows are the batch's, row for row. A
    batch's addresses are its rows' addresses, stacked.

    Attributes:
        resolve_rows: `(arrays, at, rows) -> those rows' addresses, stacked`,
            for a 1-d array of row numbers in `[0, batch_size)` of the
            mode's unsigned dtype.
        batch_size: Rows per batch.
        unsigned: The unsigned integer dtype of the compiling mode.
    """

    resolve_rows: Callable[[Sequence[Any], Split, Any], Any]
    batch_size: int
    unsigned: np.dtype[Any]

    def rows(self, arrays: Sequence[Any], at: Split, rows: Any) -> Any:
        """Rows `rows` (integers in `[0, batch_size)`, traced or not) of the batch at `at`."""
        import jax.numpy as jnp

        rows = jnp.asarray(rows).astype(self.unsigned)
        return self.read(arrays, self.resolve_rows(arrays, at, rows))


def _parent_positions(starts: np.ndarray, stops: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """All parent positions of a block of batches, in order: `[starts[j], stops[j])` for each j."""
    if np.array_equal(starts[1:], stops[:-1]):  # batches that follow each other: one range
        return np.arange(int(starts[0]), int(stops[-1]), dtype=np.int64)
    # The start of each batch repeated over its size, plus the offset inside the batch.
    ends = np.cumsum(sizes)
    offsets = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - sizes, sizes)
    return np.repeat(starts, sizes) + offsets


@dataclasses.dataclass(frozen=True, repr=False)
class BatchedStream(PassThroughStream):
    """Consecutive elements batched; a short last batch unless `drop_remainder`."""

    spec_rule = SpecRule.BATCHED
    next_index_rule = (
        NextIndexRule.BATCH
    )  # batches begun: a short last batch counts as one, as in Grain
    random_stage = RandomStage(
        "batch",
        (ArgumentKind.BATCH_SIZE,),
        (("drop_remainder", ArgumentKind.DROP_REMAINDER),),
        in_grain=True,
    )
    loader_records = IN_EACH_WORKER  # its state is its parent's

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None
    sort_keys: bool = False

    def open(self, state: Any) -> Cursor:
        if self.batch_fn is None:
            parent = self.parent.open(state)
            return _BatchCursor(parent, self.batch_size, self.drop_remainder, self.sort_keys)
        return _UserBatchCursor(
            self.parent.open(state),
            self.batch_size,
            self.drop_remainder,
            self.batch_fn,
            self.describe_stage(),
        )

    def describe_stage(self) -> str:
        return _describe(self.batch_size, self.drop_remainder, self.batch_fn, self.sort_keys)


def _describe(size: int, drop: bool, make: Callable[..., Any] | None, sort: bool) -> str:
    """The stage's line: only the options that are set, so `batch(n)` reads as it always has."""
    extra = ", drop_remainder=True" if drop else ""
    fn = f", batch_fn={function_name(make)}" if make else ""
    keys = ", sort_keys=True" if sort else ""
    return f"batch({size}{extra}{fn}{keys})"


class _BatchCursor(BaseCursor):
    def __init__(self, parent: Cursor, size: int, drop: bool, sort: bool = False) -> None:
        self.parent, self.size, self.drop, self.sort = parent, size, drop, sort

    def next(self) -> Any:
        values = self._values()
        batch = tree.stack(values)
        return sorted_keys(batch, values[0]) if self.sort else batch

    def _values(self) -> list[Any]:
        """The elements of the next batch; StopIteration at the end."""
        values = self.parent.next_many(self.size)
        if not values or (self.drop and len(values) < self.size):
            raise StopIteration
        return values

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


class _UserBatchCursor(_BatchCursor):
    """Batches made by a user's `batch_fn`, whose errors name the batch."""

    def __init__(
        self,
        parent: Cursor,
        size: int,
        drop: bool,
        make: Callable[[Sequence[Any]], Any],
        stage: str,
    ) -> None:
        super().__init__(parent, size, drop)
        self.make, self.stage = make, stage

    def next(self) -> Any:
        values = self._values()
        try:
            return self.make(values)
        except Exception as error:
            where = f"the batch of {len(values)} elements that ends at {state_of(self.parent)}"
            validate.note_user_error(error, self.stage, where)
            raise


@toolz.curry
def batch(
    batch_size: int,
    data: Data,
    *,
    drop_remainder: bool = False,
    batch_fn: Callable[[Sequence[Any]], Any] | None = None,
    sort_keys: bool = False,
) -> Data:
    """Consecutive elements stacked leaf by leaf along a new first axis.

    A dataset batches every epoch on its own, so no batch mixes two epochs.
    With `batch_fn`, that function turns each list of elements into a batch.

    Key order: a batched dict has the keys of the batch's first element in
    that element's order (insertion order), at every level. With
    `sort_keys=True` they come out sorted instead (`sorted_keys`), the order
    Grain's batches have (JAX's pytree order); the Grain API's batches set it.

    Args:
        batch_size: Elements per batch, at least 1.
        data: A dataset or a stream.
        drop_remainder: Drop each epoch's last batch (a stream's last batch)
            if it is short.
        batch_fn: Makes a batch of a list of elements, instead of stacking.
        sort_keys: Sort the keys of the batch's dicts. Only for the batches
            this stage stacks: a `batch_fn` orders its own batches.

    Returns:
        A dataset of `ceil(length / batch_size)` batches (`floor` with
        `drop_remainder`), or a stream of batches.

    Raises:
        ValueError: if `batch_size` is not a positive int, if a map-level batch
            follows a stage that leaves holes (a filter), or if `sort_keys`
            comes with a `batch_fn`.

    Examples:
        >>> from grainfn.fn import range, source
        >>> batch(2, range(5)).get_many([0, 2, 3])
        [array([0, 1]), array([4]), array([0, 1])]
        >>> list(batch(2, source([{"b": 1, "a": 2}] * 2)).get(0))
        ['b', 'a']
        >>> list(batch(2, source([{"b": 1, "a": 2}] * 2), sort_keys=True).get(0))
        ['a', 'b']
    """
    batch_size = validate.check_positive_int(batch_size, "batch_size", validate.INT64_MAX)
    drop_remainder = validate.check_flag(drop_remainder, "batch drop_remainder")
    sort_keys = validate.check_flag(sort_keys, "batch sort_keys")
    if batch_fn is not None:
        validate.check_callable(batch_fn, "batch_fn")
        if sort_keys:
            raise ValueError(
                f"batch got sort_keys=True and batch_fn={function_name(batch_fn)}: sort_keys "
                "orders the batches that batch stacks itself, and a batch_fn makes its own. "
                "Drop sort_keys, and order the keys in the batch_fn if they matter."
            )
    if isinstance(data, Stream):
        return BatchedStream(data, batch_size, drop_remainder, batch_fn, sort_keys)
    ds = as_dataset(data, "batch")
    if (found := upstream_holes(ds)) is not None:
        raise ValueError(
            f"A map-level batch cannot follow {found.describe_stage()}: it leaves None holes, "
            "so batches would come out short. Batch the stream instead, which drops the holes "
            "first: fn.batch(n, fn.from_dataset(ds)), or ds.to_iter_dataset().batch(n) in the "
            "Grain API."
        )
    return BatchedDataset(ds, batch_size, drop_remainder, batch_fn, sort_keys)


def sorted_keys(batch: Any, like: Any) -> Any:
    """`batch` with the keys of its dicts sorted, at every level: Grain's (JAX's) key order.

    `like` is an element of the batch (its first), whose structure `batch`
    has: where it holds an `OrderedDict`, that dict keeps its order, as in
    JAX. Keys that cannot be compared with each other (`1` and `"a"`) keep
    their order too (Grain refuses such a dict). Lists, tuples and
    namedtuples keep their order and type; leaves are returned as they are.

    Args:
        batch: A batch that `pytree.stack` made of elements like `like`.
        like: One of the elements stacked.

    Returns:
        The same batch (the same leaves), its dicts rebuilt in sorted key order.

    Examples:
        >>> batch = {"b": 1, "a": [{"d": 2, "c": 3}]}
        >>> sorted_keys(batch, batch)
        {'a': [{'c': 3, 'd': 2}], 'b': 1}
        >>> sorted_keys({"b": 1, "a": 2}, collections.OrderedDict(b=0, a=0))
        {'b': 1, 'a': 2}
        >>> sorted_keys({"b": 1, 2: 3}, {"b": 0, 2: 0})
        {'b': 1, 2: 3}
    """
    try:
        return _sorted_keys(batch, like)
    except RecursionError:
        raise tree.too_deep("A batch") from None


def _sorted_keys(batch: Any, like: Any) -> Any:
    if isinstance(batch, dict):
        keys = list(batch)
        if not isinstance(like, collections.OrderedDict):
            with contextlib.suppress(TypeError):  # keys that do not compare: their own order
                keys = sorted(keys)  # (list.sort would leave them half sorted)
        return {key: _sorted_keys(batch[key], like[key]) for key in keys}
    if isinstance(batch, (list, tuple)):
        items = [_sorted_keys(b, e) for b, e in zip(batch, like)]
        return type(batch)(*items) if hasattr(type(batch), "_fields") else type(batch)(items)
    node, like_node = tree.jax_children(batch), tree.jax_children(like)
    if node is not None and like_node is not None:  # a JAX node: its fields, in its order
        children = [_sorted_keys(b, e) for b, e in zip(node[0], like_node[0])]
        return tree.jax_rebuild(node[1], children)
    return batch


def batch_and_pad(values: Sequence[T], *, batch_size: int, pad_value: Any = 0) -> T:
    """Stacks `values` leaf by leaf and pads the batch up to `batch_size` elements.

    Pass it to `batch` as `batch_fn`, with the same `batch_size`, to keep the
    last short batch at full size instead of dropping it.

    Args:
        values: One to `batch_size` elements of the same structure (dicts,
            lists, tuples and namedtuples of leaves) whose leaves have equal shapes.
        batch_size: The size of the batch returned.
        pad_value: The value the missing elements' leaves are filled with, cast
            to the dtype of the first value's leaf.

    Returns:
        A pytree of the values' structure whose leaves are numpy arrays with a
        leading axis of size `batch_size`: the stacked values, then padding.
        Its dicts have their keys sorted, as Grain's `batch_and_pad` gives.

    Raises:
        ValueError: if `values` is empty or longer than `batch_size`, if the
            values differ in structure or in a leaf's shape, or if `pad_value`
            does not fit a leaf's dtype.

    Examples:
        >>> batch_and_pad([1, 2], batch_size=4)
        array([1, 2, 0, 0])
        >>> batch_and_pad([{"x": 1.5, "y": (1, 2)}], batch_size=2, pad_value=-1)
        {'x': array([ 1.5, -1. ]), 'y': (array([ 1, -1]), array([ 2, -1]))}
        >>> import functools
        >>> import grainfn as grain
        >>> pad = functools.partial(batch_and_pad, batch_size=3)
        >>> [b.tolist() for b in grain.MapDataset.range(1, 5).batch(3, batch_fn=pad)]
        [[1, 2, 3], [4, 0, 0]]
        >>> batch_and_pad([1, 2, 3], batch_size=2)
        Traceback (most recent call last):
        ...
        ValueError: batch_and_pad got 3 values for a batch of batch_size=2; ...
    """
    batch_size = validate.check_positive_int(batch_size, "batch_size", validate.INT64_MAX)
    count = len(values)
    if count == 0:
        raise ValueError("batch_and_pad needs at least one value to batch, got none.")
    if count > batch_size:
        raise ValueError(
            f"batch_and_pad got {count} values for a batch of batch_size={batch_size}; pass "
            "the same batch_size to batch and to batch_and_pad."
        )
    padding = pad_like(values[0], pad_value) if count < batch_size else None
    stacked = tree.stack([*values, *[padding] * (batch_size - count)])
    return sorted_keys(stacked, values[0])  # Grain's stacks through JAX: its keys sorted


def pad_like(element: Any, pad_value: Any) -> Any:
    """An element of `element`'s structure, each leaf `pad_value` in that leaf's shape and dtype.

    Examples:
        >>> pad_like({"a": np.ones((2,), np.float32), "b": [7, "xy"], "c": None}, 5)
        {'a': array([5., 5.], dtype=float32), 'b': [array(5), array('5', dtype='<U2')], 'c': None}
    """

    def pad(leaf: Any) -> Any:
        if leaf is None:  # an empty subtree stays empty
            return None
        array = np.asarray(leaf)
        try:
            return np.full(array.shape, pad_value, dtype=array.dtype)
        except (OverflowError, TypeError, ValueError) as error:
            raise ValueError(
                f"pad_value={pad_value!r} does not fit a leaf of dtype {array.dtype} ({error}); "
                "pass a pad_value every leaf's dtype can hold."
            ) from None

    try:
        return tree.map_leaves(pad, element)
    except RecursionError:
        raise tree.too_deep("The element to pad") from None
