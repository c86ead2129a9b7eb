"""The Dataset record: a length and a pure map from index to element.

Every combinator returns a new frozen record; nothing is ever mutated. An index
`>= length` addresses a later epoch (shuffles draw a new permutation there,
random maps new numbers), and `None` means "no element here" (what `filter`
leaves behind). Each record answers one index with `get` and a whole block with
`get_many`, which resolves the index math of the block in one vectorized call.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, TypeVar

import numpy as np

from grainfn._src.core import declarations, validate
from grainfn._src.core.loader_records import LoaderRecords
from grainfn._src.core.random_stage import RandomStage
from grainfn._src.core.spec_rule import SpecRule

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler, Program

T = TypeVar("T")

INFINITE = sys.maxsize
"""The length of an infinitely repeated dataset, as in Grain."""


class ParentIndex(NamedTuple):
    """Where a dataset stage reads one of its positions: see `Dataset.trace_parent`.

    Attributes:
        parent: Which of the stage's `parents` it reads (0 for one-parent stages).
        first: The (first) index it reads there.
        size: How many consecutive indices it reads from `first` on (a batch reads several).
    """

    parent: int
    first: int
    size: int = 1


@declarations.declares_hooks
@dataclasses.dataclass(frozen=True, repr=False)
class Dataset(Generic[T]):
    """A dataset: `length` elements per epoch, each computed on demand from its index.

    Build datasets with the functions of `grainfn.fn`; this class only defines
    what they all answer.

    Attributes:
        length: The number of positions in one epoch; `sys.maxsize` if infinite.
    """

    length: int = dataclasses.field(init=False)
    # The declarations a stage class can make (see `grainfn._src.core.declarations`).
    makes_holes: ClassVar[bool] = False
    """Whether this stage may put None at positions its parents fill (filter, flat_map)."""
    elementwise: ClassVar[bool] = False
    """Whether its element `i` is a function of its parent's element `i` alone (map, filter).

    It commutes with a slice of its parent, so logical shards may read it as one dataset."""
    logical_shard_cut: ClassVar[bool] = False
    """Whether it is the cut a logical shard makes of a leaf (a slice).

    Its parent's positions `start, start + step, ...`, its fields (see
    `grainfn._src.shards.logical`)."""
    transparent: ClassVar[bool] = False
    """Whether this stage changes how a pipeline runs, not what it yields.

    Timing: no line in the pipeline's description."""
    spec_rule: ClassVar[SpecRule] = SpecRule.UNKNOWN
    """How `grainfn.fn.element_spec` infers this stage's elements.

    A member of `SpecRule`, done by `grainfn._src.inspect.element_spec.RULES`
    (UNKNOWN: it cannot)."""
    device_refusal: ClassVar[str] = "this stage kind has no device form"
    """Why `fn.to_jax` cannot run this stage kind, where it has no `device_program`."""
    takes_wide_offsets: ClassVar[bool] = False
    """Whether the program `device_program` makes also takes `Wide` offsets.

    32-bit positions within an epoch past 2**32 - 1; see `grainfn._src.core.compiler`."""
    calls_functions: ClassVar[bool] = False
    """Whether it calls a user function on its elements (map, map_with_index, random_map).

    The host twin of `fn.to_jax` runs it compiled, as the device does (its floats round alike)."""
    random_stage: ClassVar[RandomStage | tuple[RandomStage, ...] | None] = None
    """How `grainfn.testing`'s random pipelines draw this stage.

    See `grainfn._src.core.random_stage`; None: they do not draw it."""

    loader_records: ClassVar[LoaderRecords | None] = None
    """How its positions follow the records Grain's DataLoader state counts.

    See `grainfn._src.core.loader_records`; None: no DataLoader state is read through it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Checks a new stage class's declarations when it is made (`declarations.check`)."""
        super().__init_subclass__(**kwargs)
        declarations.check(cls, Dataset)

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        """This stage's device form: a jax program of its positions up to `bound`.

        A stage kind that runs on device (`fn.to_jax`) defines it in its own
        module, compiling its parents with `compiler.compile`; see
        `grainfn._src.core.compiler`. Here, a stage kind that has none.
        """
        raise NotImplementedError(f"{type(self).__name__} has no device form.")

    @property
    def vmap_width(self) -> int | None:
        """How many parent elements its device form reads under one `jax.vmap`, or None.

        A batch reads its rows so; other stages read one element at a time.
        The host twin of `fn.to_jax` runs the functions below it in vmaps of
        the same widths: XLA may round a reduction otherwise at another width.
        """
        return None

    @property
    def has_device_form(self) -> bool:
        """Whether this stage kind defines `device_program`."""
        return type(self).device_program is not Dataset.device_program

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        """The datasets this one reads from."""
        return ()

    @property
    def pipeline_seed(self) -> int | None:
        """The seed a `seed` stage sets for downstream random stages; None elsewhere."""
        return None

    def get(self, index: int) -> T | None:
        """Returns the element at `index`, or None if a filter removed it.

        Args:
            index: Any position >= 0; `index // length` is the epoch.

        Raises:
            IndexError: for a negative index or an empty dataset.
        """
        index = _check_index(index)
        if self.length == 0:
            raise IndexError(f"Cannot read index {index} of an empty dataset:\n{self!r}")
        return self._get(index)

    def get_many(self, indices: Sequence[int] | np.ndarray) -> list[T | None]:
        """Returns the elements at `indices`, resolving their index math in one call.

        Equal to `[self.get(i) for i in indices]`, only faster.
        """
        array = np.asarray(indices)
        if array.ndim == 1 and array.size and array.dtype.kind in "uO":
            _check_int64(array)  # Python ints past 2**63 - 1 come as uint64 or objects
        if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
            raise TypeError(
                f"indices must be a 1-D sequence of integers, got an array of shape "
                f"{array.shape} and dtype {array.dtype}."
            )
        array = array.astype(np.int64, copy=False)
        if array.size == 0:
            return []
        if array.min() < 0:
            raise IndexError(f"indices must be >= 0, got {int(array.min())}.")
        if self.length == 0:
            raise IndexError(f"Cannot read from an empty dataset:\n{self!r}")
        return read_many(self, array)

    def _get(self, index: int) -> T | None:
        raise NotImplementedError(f"{type(self).__name__} does not define _get")

    def _get_many(self, indices: np.ndarray) -> list[T | None]:
        return read_each(self, indices)

    def _get_array(self, indices: np.ndarray) -> Any | None:
        """The elements at `indices` stacked, as `pytree.stack` makes them, or None.

        An array whose row `j` is element `indices[j]`, or for elements that
        are trees of arrays, the same tree of such arrays. A source of
        numbers (an array, or a dict of arrays) gives it without one Python
        object per element, stages that only move indices pass it through,
        and `batch` cuts its batches out of it. Every other stage answers None.
        """
        return None

    def describe_stage(self) -> str:
        """One line naming this stage and its arguments, without its parents."""
        return type(self).__name__

    def trace_parent(self, index: int) -> ParentIndex:
        """Which parent, and which index of it, position `index` reads (`grainfn.fn.trace`).

        Stages that only move indices answer with the same pure index
        functions `_get` uses; a stage that does not know raises TypeError.

        Args:
            index: A position >= 0 of this stage (past `length`: a later epoch).
        """
        raise TypeError(
            f"Cannot trace through the stage {self.describe_stage()!r} "
            f"({type(self).__name__}): it does not say which parent index it reads."
        )

    def __repr__(self) -> str:
        return "\n".join(pipeline_lines(self))


@dataclasses.dataclass(frozen=True, repr=False)
class OneParent(Dataset[T]):
    """Base of the stages that read from exactly one parent."""

    parent: Dataset[Any]

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class IndexStage(OneParent[T]):
    """Base of the stages that only move indices: each position reads one parent position.

    A stage defines `parent_indices` once, on a block of positions; reading
    one element, reading a block and tracing (`grainfn.fn.trace`) all come
    from it. A stage whose index math has a faster form for one index also
    overrides `parent_index`. The length is the parent's unless the stage
    sets another in `__post_init__`.
    """

    spec_rule = SpecRule.PARENT

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        """The parent position each of `indices` (int64, >= 0) reads, as an int64 array."""
        raise NotImplementedError(f"{type(self).__name__} does not define parent_indices")

    def parent_index(self, index: int) -> int:
        """The parent position `index` reads: `parent_indices` of one position."""
        return int(self.parent_indices(np.array([index], dtype=np.int64))[0])

    def _get(self, index: int) -> T | None:
        return self.parent._get(self.parent_index(index))

    def _get_many(self, indices: np.ndarray) -> list[T | None]:
        return self.parent._get_many(self.parent_indices(indices))

    def _get_array(self, indices: np.ndarray) -> Any | None:
        return self.parent._get_array(self.parent_indices(indices))

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, self.parent_index(index))


@dataclasses.dataclass(frozen=True, repr=False)
class ElementStage(OneParent[T]):
    """Base of the stages that compute position `i` from the parent's position `i` alone.

    Map, random_map, map_with_index and filter: same length as the parent,
    and a trace goes straight through.
    """

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)


def read_each(ds: Dataset[T], indices: np.ndarray) -> list[T | None]:
    """The elements of `ds` at `indices`, read one position at a time with `_get`.

    Also the way back from a block that a user function's StopIteration
    stopped: a stage that calls user code must not let a StopIteration out
    of `_get_many` (whoever reads a block would take it for the end of the
    data, or a `_get` built on `_get_many` would pass it on), and its `_get`,
    read one position at a time, turns it into a `UserStopIterationError` that
    names the position.

    Examples:
        >>> from grainfn import fn
        >>> read_each(fn.range(5), np.array([4, 0, 7]))
        [4, 0, 2]
    """
    get = ds._get
    return [get(index) for index in indices.tolist()]


def read_many(ds: Dataset[T], indices: np.ndarray) -> list[T | None]:
    """The elements of `ds` at `indices` (int64, >= 0): one block read, or one at a time on error.

    A block read that fails is read again one position at a time with `_get`,
    where the failure happens again and the stage that raised it (a user
    function, a data source) notes its position. This is how whoever reads a
    whole block (a stream, an executor, `get_many`) gets errors that name
    their position, at no cost when nothing fails.

    Examples:
        >>> from grainfn import fn
        >>> read_many(fn.range(5), np.array([4, 0, 7]))
        [4, 0, 2]
    """
    try:
        return ds._get_many(indices)
    except Exception:  # read one by one: the error then names the position that failed
        return read_each(ds, indices)


def set_length(record: Dataset[Any], length: int) -> None:
    """Fills in the derived `length` field of a frozen record being built."""
    object.__setattr__(record, "length", length)


def function_name(fn: Any) -> str:
    """A short readable name for a user function or transform object.

    An object can name itself with a `display_name` string attribute.
    """
    name = (
        getattr(fn, "display_name", None)
        or getattr(fn, "__qualname__", None)
        or getattr(type(fn), "__qualname__", None)
    )
    return str(name) if name else repr(fn)


def upstream_holes(ds: Dataset[Any]) -> Dataset[Any] | None:
    """The nearest stage above `ds` that leaves None holes (a filter or a flat_map), if any.

    A map-level batch cannot follow one (its batches would come out short), and
    reading skips the holes.
    """
    to_visit = [ds]
    while to_visit:
        node = to_visit.pop()
        if node.makes_holes:
            return node
        to_visit.extend(node.parents)
    return None


def pipeline_lines(node: Any, depth: int = 0) -> list[str]:
    """The pipeline above `node` (a dataset or stream), one indented line per stage.

    Dataset stages also show their length. A stage marked `transparent` (one
    that changes how a pipeline runs, not what it yields) adds no line.
    """
    if node.transparent:
        return [line for parent in node.parents for line in pipeline_lines(parent, depth)]
    line = "  " * depth + node.describe_stage()
    if isinstance(node, Dataset):
        line += f"  [length {'inf' if node.length >= INFINITE else node.length}]"
    lines = [line]
    for parent in node.parents:
        lines.extend(pipeline_lines(parent, depth + 1))
    return lines


def _check_int64(array: np.ndarray) -> None:
    for value in array.tolist():
        if validate.is_integer(value) and not -validate.INT64_MAX <= value <= validate.INT64_MAX:
            raise IndexError(f"indices must be in [0, 2**63 - 1], got {value}.")


def _check_index(index: Any) -> int:
    index = validate.check_integer(index, "index")
    if index < 0:
        raise IndexError(
            f"index must be >= 0, got {index}; indices past the length are later epochs."
        )
    if index > validate.INT64_MAX:
        raise IndexError(f"index must be at most 2**63 - 1, got {index}.")
    return index


def dataset_kinds() -> list[type[Dataset[Any]]]:
    """The dataset stage classes grainfn's imported modules define, by qualified name.

    A user's own subclasses are left out: declarations on these describe the library.

    Examples:
        >>> from grainfn._src.stages.shuffle import ShuffledDataset
        >>> ShuffledDataset in dataset_kinds()
        True
    """
    return library_subclasses(Dataset)


def library_subclasses(base: type[Any]) -> list[type[Any]]:
    """`base` and its subclasses that grainfn's imported modules define, by qualified name."""
    found: list[type[Any]] = []
    bases: list[type[Any]] = [base]
    while bases:
        kind = bases.pop()
        found += [kind] if kind.__module__.startswith("grainfn.") else []
        bases += kind.__subclasses__()
    return sorted(set(found), key=lambda kind: (kind.__module__, kind.__qualname__))
