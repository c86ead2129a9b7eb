"""Element specs: the structure, shapes and dtypes of a pipeline's elements, without reading any.

A spec is a pytree (dicts, lists, tuples, namedtuples, None) whose leaves
have a `shape` and a `dtype`, such as `ShapeDtypeStruct`. It is inferred from
the pipeline alone, stage by stage, with Grain's rules:

- `range` gives `ShapeDtypeStruct((), np.int64)`;
- stages that only move, drop or repeat elements (seed, shuffle,
  window_shuffle, slice, repeat, filter, limit, from_dataset, mp_prefetch)
  keep their parent's spec;
- mix, concatenate, select_from_datasets and interleave give their first
  component's spec (an interleave over a dataset of datasets reads its first
  element for that, as Grain does), zip the tuple of its components' specs;
- map, random_map and map_with_index ask their transformation: it must have
  an `output_spec(input_spec)` method;
- batch puts a leading axis in front of every leaf: `batch_size` with
  `drop_remainder`, None (unknown) without. A custom `batch_fn` must have an
  `output_spec(input_spec, batch_size, drop_remainder)` method, except
  `batch_and_pad`, whose batches always have its `batch_size` rows; rebatch
  sets the leading axis to its batch size;
- a subclass of the Grain API's MapDataset or IterDataset may define its
  own `_element_spec` (a property, as in Grain).

Anything else (a source, flat_map, a Parquet file) raises NotImplementedError,
as in Grain: its elements cannot be known without reading them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grainfn._src.core import pytree as tree
from grainfn._src.core.arguments import core_of
from grainfn._src.core.dataset import Dataset, function_name
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Stream
from grainfn._src.stages.batch import batch_and_pad, sorted_keys

_TRANSFORM_METHODS = ("map", "random_map", "map_with_index")


@runtime_checkable
class ShapeDtypeStructProtocol(Protocol):
    """What a leaf of an element spec has: a `shape` and a `dtype`."""

    @property
    def shape(self) -> tuple[int | None, ...]:
        """The shape; None for an axis whose size is not known in advance."""
        ...

    @property
    def dtype(self) -> Any:
        """The numpy dtype (or anything `np.dtype` accepts)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class ShapeDtypeStruct:
    """The shape and dtype of one leaf of an element.

    Attributes:
        shape: The leaf's shape; None for an axis of unknown size (the batch
            axis of a batch that may come out short).
        dtype: The leaf's dtype, as numpy takes it (`np.int64`, `np.dtype("f4")`, ...).

    Examples:
        >>> ShapeDtypeStruct(shape=(None, 3), dtype=np.float32)
        ShapeDtypeStruct(shape=(None, 3), dtype=<class 'numpy.float32'>)
    """

    shape: tuple[int | None, ...]
    dtype: Any


def get_element_spec(ds: Any) -> Any:
    """The spec of the elements `ds` yields, inferred from its stages without reading data.

    Args:
        ds: A `MapDataset` or `IterDataset` of the Grain API, or a grainfn
            `Dataset` or `Stream`.

    Returns:
        A pytree of the elements' structure with a `ShapeDtypeStruct` (or a
        transformation's own spec leaf) for every leaf.

    Raises:
        NotImplementedError: if a stage's elements cannot be inferred (a source,
            flat_map, a file format, or a custom batch_fn without `output_spec`).
        ValueError: if a map's transformation has no `output_spec` method.
        TypeError: if `ds` is not a dataset.

    Examples:
        >>> import grainfn as grain
        >>> get_element_spec(grain.MapDataset.range(10).batch(4))
        ShapeDtypeStruct(shape=(None,), dtype=<class 'numpy.int64'>)
        >>> class Pair(grain.transforms.Map):
        ...     def map(self, x):
        ...         return {"x": x, "y": np.zeros(3, np.float32)}
        ...     def output_spec(self, spec):
        ...         return {"x": spec, "y": ShapeDtypeStruct((3,), np.float32)}
        >>> ds = grain.MapDataset.range(10).map(Pair()).to_iter_dataset()
        >>> get_element_spec(ds.batch(2, drop_remainder=True))["y"]
        ShapeDtypeStruct(shape=(2, 3), dtype=<class 'numpy.float32'>)
        >>> get_element_spec(grain.MapDataset.source([1, 2]))
        Traceback (most recent call last):
        ...
        NotImplementedError: element_spec inference is not implemented for source(list, length 2)...
    """
    if isinstance(ds, (Dataset, Stream)):
        return element_spec(ds)
    if hasattr(type(ds), "_element_spec"):
        return ds._element_spec  # a Grain-API subclass that states its spec
    try:
        core = core_of(ds)  # the dataset or stream a MapDataset or IterDataset wraps
    except TypeError:  # an IterDataset subclass with an iterator of its own
        raise _not_implemented(type(ds).__qualname__) from None
    if not isinstance(core, (Dataset, Stream)):
        raise TypeError(
            f"get_element_spec takes a MapDataset, an IterDataset, or a grainfn Dataset or "
            f"Stream, got {ds!r} of type {type(ds).__name__}."
        )
    return element_spec(core)


def element_spec(value: Any) -> Any:
    """The element spec of a core value (see the module doc), by the rule its stage declares.

    Each stage class names its rule in its `spec_rule` attribute, a member of
    `SpecRule` that `RULES` does; a stage with none (UNKNOWN) raises
    NotImplementedError.

    Examples:
        >>> from grainfn import fn
        >>> element_spec(fn.batch(3, fn.shuffle(fn.range(7), seed=1), drop_remainder=True))
        ShapeDtypeStruct(shape=(3,), dtype=<class 'numpy.int64'>)
    """
    if not isinstance(value, (Dataset, Stream)):
        raise TypeError(
            f"element_spec takes a grainfn Dataset or Stream, got {value!r} of type "
            f"{type(value).__name__}."
        )
    if not value.spec_rule.infers:
        raise _not_implemented(value.describe_stage())
    return RULES[value.spec_rule](value)


def _parent_spec(stage: Any) -> Any:
    """The spec of the stage's first parent: for stages that move, drop or route elements."""
    return element_spec(stage.parents[0])


def _range(ds: Any) -> ShapeDtypeStruct:
    return ShapeDtypeStruct(shape=(), dtype=np.int64)


def _object(ds: Any) -> Any:
    if hasattr(type(ds.obj), "_element_spec"):
        return ds.obj._element_spec
    raise _not_implemented(ds.describe_stage())


def _first_dataset(stream: Any) -> Any:
    return element_spec(stream.stream_at(0))  # reads the first dataset, as Grain does


def _zipped(stage: Any) -> tuple[Any, ...]:
    return tuple(element_spec(component) for component in stage.parents)


def _mapped_spec(stage: Any) -> Any:
    """Asks the transformation of a map-like stage for its `output_spec`, as Grain does."""
    fn = stage.fn
    # A transformation object reaches the core as its bound method.
    owner = fn.__self__ if inspect.ismethod(fn) and fn.__name__ in _TRANSFORM_METHODS else fn
    output_spec = getattr(owner, "output_spec", None)
    if not callable(output_spec):
        name = function_name(owner)
        raise ValueError(
            f"Cannot infer the element spec of {stage.describe_stage()}: its transformation "
            f"{name} has no output_spec method. Define {name}.output_spec(self, input_spec), "
            "returning the spec of what it returns for an input of spec input_spec."
        )
    return output_spec(_parent_spec(stage))


def _batched_spec(stage: Any) -> Any:
    """A leading batch axis on every leaf, or what the custom `batch_fn` says."""
    spec = _parent_spec(stage)
    batch_fn = stage.batch_fn
    target: Any = batch_fn.func if isinstance(batch_fn, functools.partial) else batch_fn
    if batch_fn is None or target is tree.stack:
        size = stage.batch_size if stage.drop_remainder else None
    elif target is batch_and_pad and isinstance(batch_fn, functools.partial):
        size = batch_fn.keywords.get("batch_size")
        if size is None:
            raise _custom_batch_fn(stage)
    elif callable(getattr(target, "output_spec", None)):
        return target.output_spec(spec, stage.batch_size, stage.drop_remainder)
    else:
        raise _custom_batch_fn(stage)
    batched = with_batch_axis(spec, size)
    return sorted_keys(batched, spec) if getattr(stage, "sort_keys", False) else batched


def _rebatched(stream: Any) -> Any:
    def resize(leaf: Any) -> Any:
        if not isinstance(leaf, ShapeDtypeStructProtocol):
            return leaf
        kind: Any = type(leaf)  # Grain keeps each leaf's own type
        return kind(shape=(stream.batch_size, *tuple(leaf.shape)[1:]), dtype=leaf.dtype)

    return tree.map_leaves(resize, _parent_spec(stream))


def with_batch_axis(spec: Any, size: int | None) -> Any:
    """`spec` with a leading axis of `size` (None: unknown) on every leaf.

    Examples:
        >>> with_batch_axis({"x": ShapeDtypeStruct((2,), np.uint8), "y": None}, 8)
        {'x': ShapeDtypeStruct(shape=(8, 2), dtype=<class 'numpy.uint8'>), 'y': None}
    """

    def add_axis(leaf: Any) -> Any:
        if leaf is None:  # an empty subtree stays empty
            return None
        if not isinstance(leaf, ShapeDtypeStructProtocol):
            raise TypeError(
                f"Cannot batch the element spec leaf {leaf!r}: spec leaves need a shape and a "
                "dtype (a ShapeDtypeStruct)."
            )
        return ShapeDtypeStruct(shape=(size, *tuple(leaf.shape)), dtype=leaf.dtype)

    return tree.map_leaves(add_axis, spec)


def _custom_batch_fn(stage: Any) -> NotImplementedError:
    return NotImplementedError(
        f"Cannot infer the element spec of {stage.describe_stage()}: a custom batch_fn needs an "
        "output_spec(input_spec, batch_size, drop_remainder) method giving the spec of its "
        "batches."
    )


def _not_implemented(stage: str) -> NotImplementedError:
    return NotImplementedError(
        f"element_spec inference is not implemented for {stage}: its elements are only known "
        "by reading them."
    )


RULES: dict[SpecRule, Callable[[Any], Any]] = {
    SpecRule.PARENT: _parent_spec,
    SpecRule.RANGE: _range,
    SpecRule.OBJECT: _object,
    SpecRule.FIRST_DATASET: _first_dataset,
    SpecRule.ZIPPED: _zipped,
    SpecRule.MAPPED: _mapped_spec,
    SpecRule.BATCHED: _batched_spec,
    SpecRule.REBATCHED: _rebatched,
}
"""What each spec rule a stage may declare does: every `SpecRule` that infers one."""
