"""Leaf datasets: integer ranges and random-access sources (`fn.range`, `fn.source`).

A source is the user's code: an error its `[]` raises keeps its type and gains
a note naming the source, the index it was asked for and the position read;
a StopIteration becomes a `UserStopIterationError` naming the position, as one
of a map function does. Its `len()` must be an integer in [0, 2**63 - 1].
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from grainfn._src.core import aligned, validate
from grainfn._src.core import pytree as tree
from grainfn._src.core.compiler import NotOnDeviceError, Program, device_array
from grainfn._src.core.dataset import Dataset, function_name, read_each, set_length
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.index.device_ints import offset_bound, require

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler

T = TypeVar("T")


T_co = TypeVar("T_co", covariant=True)

NUMBER_KINDS = "biufc"
"""The numpy dtype kinds whose rows a numpy source hands out as one array (not objects)."""


@runtime_checkable
class RandomAccessDataSource(Protocol[T_co]):
    """What a source needs: `len(source)` records and `source[i]` for `0 <= i < len`.

    Subclassing it is optional: any object with these two methods works. For
    worker processes it must pickle; a readable `__repr__` names it in
    pipeline descriptions. A `__getitems__(indices)` method, if present, reads
    a block of records at once.
    """

    def __len__(self) -> int:
        """The number of records."""
        ...

    def __getitem__(self, index: int) -> T_co:
        """The record at `index`, for `0 <= index < len(self)`."""
        ...


@dataclasses.dataclass(frozen=True)
class RangeDataSource:
    """The integers of `range(start, stop, step)` as a data source.

    Examples:
        >>> source = RangeDataSource(2, 10, 3)
        >>> len(source), source[1]
        (3, 5)
    """

    start: int
    stop: int
    step: int

    def __len__(self) -> int:
        return len(builtins.range(self.start, self.stop, self.step))

    def __getitem__(self, index: int) -> int:
        return builtins.range(self.start, self.stop, self.step)[index]


@dataclasses.dataclass(frozen=True, repr=False)
class RangeDataset(Dataset[int]):
    """The integers of `range(start, stop, step)`, repeated every epoch."""

    spec_rule = SpecRule.RANGE

    start: int
    stop: int
    step: int
    wide: bool = dataclasses.field(init=False, compare=False)
    """Whether its numbers or their span exceed 64 bits: then read in Python ints, not numpy."""

    def __post_init__(self) -> None:
        set_length(self, range_length(self.start, self.stop, self.step))
        span = (self.start, self.stop, self.step, self.stop - self.start)
        object.__setattr__(self, "wide", any(abs(n) > validate.INT64_MAX for n in span))

    def _get(self, index: int) -> int:
        return self.start + (index % self.length) * self.step

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        if self.wide:
            return read_each(self, indices)
        return self._numbers(indices).tolist()

    def _get_array(self, indices: np.ndarray) -> np.ndarray | None:
        return None if self.wide else self._numbers(indices)

    def _numbers(self, indices: np.ndarray) -> np.ndarray:
        offsets = indices % self.length
        if self.step != 1:
            offsets *= self.step
        if self.start:
            offsets += self.start
        return offsets

    def describe_stage(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        mode = compiler.mode
        last = self.start + offset_bound(self.length, bound) * self.step
        info = np.iinfo(mode.position_dtype)
        require(
            info.min <= min(self.start, last) and max(self.start, last) <= info.max,
            self.describe_stage(),
            f"its values reach {last}, outside {mode.position_dtype}",
            mode,
        )
        start, step, dtype = (
            mode.constant(self.start),
            mode.constant(self.step),
            mode.position_dtype,
        )
        # Wrapping unsigned arithmetic, then a cast: exact, as the value fits the signed dtype.
        # The value is all index math: its address is the element itself.
        return Program(lambda arrays, at: (start + at.offset * step).astype(dtype), _itself)


@dataclasses.dataclass(frozen=True, repr=False)
class SourceDataset(Dataset[Any]):
    """The items of a random-access source: a Sequence or anything with `len` and `[]`.

    A source that reads many items at once faster than one by one can offer a
    `__getitems__(indices)` method (Grain's data sources do); it is used for
    blocks of positions.
    """

    source: Any

    def __post_init__(self) -> None:
        set_length(self, source_length(self.source))

    def _get(self, index: int) -> Any:
        key = index % self.length
        try:
            return self.source[key]
        except Exception as error:  # the user's source: keeps its type, gains a note
            validate.note_source_error(error, self.describe_stage(), key, index)
            raise

    def _get_array(self, indices: np.ndarray) -> Any | None:
        source = self.source
        if isinstance(source, np.ndarray) and source.dtype.kind in NUMBER_KINDS:
            # What stacking the rows would give.
            return aligned.take_rows(source, indices % self.length)
        if isinstance(source, ArrayTree) and source.gathers:
            return source.rows(indices % self.length)
        return None

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        positions = (indices % self.length).tolist()
        read_many = _batched_reader(self.source)
        # Another error goes up as it is: whoever reads the block reads it again one
        # position at a time (`dataset.read_many`), and `_get` notes where it fails.
        try:
            if read_many is not None:
                items = list(read_many(positions))
            else:
                items = list(map(self.source.__getitem__, positions))
            if len(items) == len(positions):  # fewer: list(map(...)) took a StopIteration
                return items  # of __getitem__ for the end of the map
        except StopIteration:  # never out of a dataset: `_get` names it and its position
            pass
        return read_each(self, indices)

    def describe_stage(self) -> str:
        return f"source({function_name(self.source)}, length {self.length})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        import jax

        tree = self.source.tree if isinstance(self.source, ArrayTree) else _items_array(self)
        leaves, structure = jax.tree_util.tree_flatten(tree)
        places = [compiler.add(device_array(leaf, self.describe_stage())) for leaf in leaves]

        def read(arrays: Sequence[Any], row: Any) -> Any:
            return jax.tree_util.tree_unflatten(structure, [arrays[i][row] for i in places])

        return Program(lambda arrays, at: at.offset, read)


def _itself(arrays: Sequence[Any], value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayTree:
    """A source of rows: record `i` is row `i` of every array in a dict of arrays.

    The dict may nest dicts, lists and tuples; its arrays share their first
    dimension. `fn.source` makes one of such a dict.

    Examples:
        >>> rows = ArrayTree({"x": np.arange(6).reshape(3, 2), "y": np.array([7, 8, 9])})
        >>> len(rows), rows[1]
        (3, {'x': array([2, 3]), 'y': np.int64(8)})
    """

    tree: Any

    def __len__(self) -> int:
        return int(tree.leaves(self.tree)[0].shape[0])

    def __getitem__(self, index: int) -> Any:
        return tree.map_leaves(lambda leaf: leaf[index], self.tree)

    @functools.cached_property
    def gathers(self) -> bool:
        """Whether `rows` gives what stacking the records would: numpy arrays of numbers."""
        leaves = tree.leaves(self.tree)
        return all(type(leaf) is np.ndarray and leaf.dtype.kind in NUMBER_KINDS for leaf in leaves)

    def rows(self, positions: np.ndarray) -> Any:
        """Records `positions` (in range), stacked: one gather per array, 64-byte aligned."""
        return tree.map_leaves(lambda leaf: aligned.take_rows(leaf, positions), self.tree)

    @property
    def display_name(self) -> str:
        """How pipeline descriptions name this source: its arrays' shapes and dtypes."""
        shapes = tree.map_leaves(lambda leaf: f"{tuple(leaf.shape)} {leaf.dtype}", self.tree)
        return f"arrays {shapes}"

    def __repr__(self) -> str:
        return self.display_name


def array_tree(data: Any) -> ArrayTree | None:
    """`data` as an ArrayTree, or None if it is not a dict of arrays.

    A dict of arrays is non-empty, has string keys, and its leaves are arrays.

    Raises:
        ValueError: for such a dict whose arrays differ in their first dimension.
    """
    if not isinstance(data, dict) or not data or not all(isinstance(k, str) for k in data):
        return None
    leaves = tree.leaves(data)
    if not leaves or not all(hasattr(leaf, "ndim") for leaf in leaves):
        return None
    if not all(leaf.ndim >= 1 for leaf in leaves):
        shapes = tree.map_leaves(lambda leaf: tuple(leaf.shape), data)
        raise ValueError(
            f"A source of arrays (a dict of them) holds a row of each array per record, so "
            f"every array needs a first dimension (the number of records); got shapes "
            f"{shapes}, where () is a single value. Give it one row per record "
            "(np.full(n, value)), or pass it to the map that needs it (fn.map(f, ds, arrays=...))."
        )
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) > 1:
        shapes = tree.map_leaves(lambda leaf: tuple(leaf.shape), data)
        raise ValueError(
            f"A source of arrays needs every array to have the same first dimension (the "
            f"number of records), got shapes {shapes}."
        )
    return ArrayTree(data)


def _batched_reader(source: Any) -> Callable[[list[int]], Any] | None:
    reader = getattr(source, "__getitems__", None)
    return reader if callable(reader) else None


def check_source(source: Any) -> Any:
    """Checks that `source` supports `len(source)` and `source[i]`, and that its length fits.

    Raises:
        TypeError: for an object without `__len__` and `__getitem__`, or whose
            `__len__` returns something other than an integer.
        ValueError: for a length outside [0, 2**63 - 1].
    """
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise TypeError(
            f"A source must support len() and [] (a Sequence or a random-access data "
            f"source), got {validate.short_repr(source)} of type {type(source).__name__}."
        )
    source_length(source)
    return source


def source_length(source: Any) -> int:
    """`len(source)`, refused with a message naming the source unless in [0, 2**63 - 1].

    Examples:
        >>> source_length(RangeDataSource(0, 10, 2))
        5
    """
    return validate.check_length(source, f"the data source {function_name(source)}")


def range_length(start: int, stop: int, step: int) -> int:
    """`len(builtins.range(start, stop, step))`, refused past 2**63 - 1 positions.

    Examples:
        >>> range_length(0, 10, 3)
        4
        >>> range_length(-2**63, 2**63, 1)
        Traceback (most recent call last):
        ...
        ValueError: range(-9223372036854775808, 9223372036854775808, 1) has 18446744073709551616
        elements; a dataset has at most 2**63 - 1 positions. Use a narrower range.
    """
    length = max(0, (stop - start + step + (-1 if step > 0 else 1)) // step)
    if length > validate.INT64_MAX:
        raise ValueError(
            f"range({start}, {stop}, {step}) has {length} elements; a dataset has at most "
            "2**63 - 1 positions. Use a narrower range."
        )
    return length


@dataclasses.dataclass(frozen=True, repr=False)
class ObjectDataset(Dataset[Any]):
    """A stage an object defines itself: `len(obj)` positions per epoch, `obj[i]` at any index.

    This is how a dataset class written against Grain's protocol (`__len__`,
    and a `__getitem__` that answers every index >= 0, later epochs included)
    joins a pipeline. `inputs` are the datasets it reads, for seeds and repr.
    """

    device_refusal = "its elements come from a Python object's __getitem__, which jax cannot trace"

    spec_rule = SpecRule.OBJECT

    obj: Any
    inputs: tuple[Dataset[Any], ...] = ()

    def __post_init__(self) -> None:
        set_length(self, validate.check_length(self.obj, f"the dataset {self.describe_stage()}"))

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return self.inputs

    def _get(self, index: int) -> Any:
        try:
            return self.obj[index]
        except Exception as error:  # the user's class: keeps its type, gains a note
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def describe_stage(self) -> str:
        return type(self.obj).__qualname__


def range(start: int, stop: int | None = None, step: int = 1) -> Dataset[int]:
    """The integers of Python's `range(start, stop, step)`.

    Examples:
        >>> range(2, 9, 3).get_many([0, 1, 2, 3])
        [2, 5, 8, 2]
    """
    if stop is None:
        start, stop = 0, start
    start, stop, step = (
        validate.check_integer(start, "start"),
        validate.check_integer(stop, "stop"),
        validate.check_integer(step, "step"),
    )
    if step == 0:
        raise ValueError("range step must not be 0, got 0.")
    return RangeDataset(start, stop, step)


def source(data: Sequence[T] | Any) -> Dataset[T]:
    """The items of a Sequence or a random-access data source (`len` and `[]`).

    A dict (of dicts, lists, tuples) of arrays that share their first dimension
    is a source of rows: record `i` holds row `i` of each array, in the same
    structure (as `tf.data.Dataset.from_tensor_slices` reads one).

    Examples:
        >>> source("abc").get(4)
        'b'
        >>> source({"x": np.array([1.5, 2.5]), "y": np.array([3, 4])}).get(1)
        {'x': np.float64(2.5), 'y': np.int64(4)}
    """
    return SourceDataset(array_tree(data) or check_source(data))


def _items_array(ds: SourceDataset) -> Any:
    """The source as one array whose rows are its items, as the host reads them.

    An array is that already. A list or tuple is a sequence of items on the
    host (`fn.source((xs, ys))` has 2 items, xs and ys, not rows of both), so
    on device it is its items stacked, which needs arrays of one shape and
    dtype; anything else is refused (rows of several arrays are a dict source).
    """
    source = ds.source
    if not isinstance(source, (list, tuple)):
        return source
    items = [item for item in source if hasattr(item, "shape") and hasattr(item, "dtype")]
    kinds = {(tuple(item.shape), np.dtype(item.dtype)) for item in items}
    if not source or len(items) != len(source) or len(kinds) != 1:
        found = sorted({_kind(item) for item in source})
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: a device source holds numeric arrays. "
            f"A {type(source).__name__} source has one item per entry on the host, so on "
            "device its entries must be arrays of one shape and dtype, stacked; got "
            f"{', '.join(found)[:200] or 'no entries'}. For rows of several arrays, pass a dict: "
            "fn.source({'x': xs, 'y': ys}); for one array, fn.source(jnp.asarray(data))."
        )
    return np.stack([np.asarray(item) for item in items])


def _kind(item: Any) -> str:
    shape = getattr(item, "shape", None)
    return type(item).__name__ if shape is None else f"{type(item).__name__} of shape {shape}"
