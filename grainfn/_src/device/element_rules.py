"""Device rules of the stages that make elements.

range, source, map, map_with_index, random_map and batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grainfn._src.core.dataset import INFINITE, function_name
from grainfn._src.device import wide
from grainfn._src.device.compiler import NotOnDeviceError
from grainfn._src.device.ints import (
    Split,
    offset_bound,
    parent_bound,
    require,
    takes_wide_offsets,
    whole_position,
    wide_offsets,
)
from grainfn._src.index import jax_keys
from grainfn._src.stages.batch import BatchedDataset
from grainfn._src.stages.map import IndexMappedDataset, MappedDataset, WithArrays
from grainfn._src.stages.random_map import RandomMappedDataset
from grainfn._src.stages.sources import ArrayTree, RangeDataset, SourceDataset

if TYPE_CHECKING:
    from grainfn._src.device.compiler import Compiler, Program


def range_rule(c: Compiler, ds: RangeDataset, bound: int) -> Program:
    last = ds.start + offset_bound(ds.length, bound) * ds.step
    info = np.iinfo(c.mode.position_dtype)
    require(
        info.min <= min(ds.start, last) and max(ds.start, last) <= info.max,
        ds.describe_stage(),
        f"its values reach {last}, outside {c.mode.position_dtype}",
        c.mode,
    )
    start, step, dtype = c.mode.constant(ds.start), c.mode.constant(ds.step), c.mode.position_dtype
    # Wrapping unsigned arithmetic, then a cast: exact, as the value fits the signed dtype.
    return lambda arrays, at: (start + at.offset * step).astype(dtype)


def source_rule(c: Compiler, ds: SourceDataset, bound: int) -> Program:
    import jax

    tree = ds.source.tree if isinstance(ds.source, ArrayTree) else _items_array(ds)
    leaves, structure = jax.tree_util.tree_flatten(tree)
    places = [c.add(_device_array(leaf, ds.describe_stage())) for leaf in leaves]

    def program(arrays: Sequence[Any], at: Split) -> Any:
        return jax.tree_util.tree_unflatten(structure, [arrays[i][at.offset] for i in places])

    return program


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


def _device_array(leaf: Any, stage: str) -> Any:
    """`leaf` checked to be a numeric array that keeps its dtype on device."""
    import jax

    dtype = getattr(leaf, "dtype", None)
    # jax's own test, not numpy's kind: bfloat16 and the other ml_dtypes are numbers to jax.
    number = dtype is not None and (
        jax.dtypes.issubdtype(dtype, np.number) or jax.dtypes.issubdtype(dtype, np.bool_)
    )
    if not hasattr(leaf, "shape") or not number:
        raise NotOnDeviceError(
            f"to_jax cannot run {stage!r}: on device it reads numeric arrays (a jax or numpy "
            f"array, or a dict of them), got {type(leaf).__name__}. Pass "
            "jnp.asarray(data), or a dict such as {'x': xs, 'y': ys}."
        )
    canonical = jax.dtypes.canonicalize_dtype(dtype)
    if canonical != np.dtype(dtype):
        raise NotOnDeviceError(
            f"to_jax cannot run {stage!r}: its array of dtype {np.dtype(dtype)} "
            f"would become {canonical} on device, so its elements would differ from the host's. "
            f"Convert it first (array.astype(np.{canonical})), or enable 64-bit types with "
            "jax.config.update('jax_enable_x64', True)."
        )
    return leaf


@takes_wide_offsets
def map_rule(c: Compiler, ds: MappedDataset, bound: int) -> Program:
    import jax

    parent, fn, stage = c.compile(ds.parent, bound), ds.fn, ds.describe_stage()
    if not isinstance(fn, WithArrays):
        return lambda arrays, at: _call(stage, fn, parent(arrays, at))
    # The map's own arrays are leaves of the compiled value, as a source's are.
    leaves, structure = jax.tree_util.tree_flatten(fn.arrays)
    places = [c.add(_device_array(leaf, stage)) for leaf in leaves]

    def program(arrays: Sequence[Any], at: Split) -> Any:
        extra = jax.tree_util.tree_unflatten(structure, [arrays[i] for i in places])
        return _call(stage, fn.fn, parent(arrays, at), extra)

    return program


def map_with_index_rule(c: Compiler, ds: IndexMappedDataset, bound: int) -> Program:
    require(
        bound <= c.mode.top,
        ds.describe_stage(),
        f"the index it passes reaches {bound}, beyond {c.mode.position_dtype}",
        c.mode,
    )
    parent, fn, stage = c.compile(ds.parent, bound), ds.fn, ds.describe_stage()
    whole, dtype = whole_position(c.mode, ds, bound), c.mode.position_dtype
    return lambda arrays, at: _call(stage, fn, whole(at).astype(dtype), parent(arrays, at))


@takes_wide_offsets
def random_map_rule(c: Compiler, ds: RandomMappedDataset, bound: int) -> Program:
    stage = ds.describe_stage()
    if ds.rng != "jax":
        raise NotOnDeviceError(
            f"to_jax cannot run {stage!r}: its function takes a numpy Generator (Grain's "
            "form, the default), which jax cannot trace. For draws that are the same on "
            "host, host workers and device, pass rng='jax': fn.random_map(f, ds, seed=..., "
            "rng='jax') gives f a jax.random key on both."
        )
    problem = jax_keys.prng_impl_problem(stage)
    if problem is not None:
        raise NotOnDeviceError(f"to_jax: {problem}")
    parent, fn, seed = c.compile(ds.parent, bound), ds.fn, ds.seed

    def program(arrays: Sequence[Any], at: Split) -> Any:
        return _call(stage, fn, parent(arrays, at), element_key(seed, at))

    return program


def element_key(seed: int, at: Split) -> Any:
    """The `jax.random` key of the element at `at` (see `grainfn._src.index.jax_keys`)."""
    offset = at.offset
    if isinstance(offset, wide.Wide):  # 32-bit, past 2**32 - 1: the words are at hand
        high, low = offset
    else:
        high = (offset >> 32).astype(np.uint32) if offset.dtype.itemsize == 8 else np.uint32(0)
        low = offset.astype(np.uint32)
    return jax_keys.element_key(seed, at.epoch.astype(np.uint32), high, low)


@takes_wide_offsets
def batch_rule(c: Compiler, ds: BatchedDataset, bound: int) -> Program:
    import jax

    size, parent_length = ds.batch_size, ds.parent.length
    if ds.batch_fn is not None:
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: its batch_fn "
            f"({function_name(ds.batch_fn)}) takes a Python list of elements. A device batch "
            "stacks them; drop batch_fn."
        )
    if parent_length < INFINITE and parent_length % size and not ds.drop_remainder:
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: the last batch of each epoch holds "
            f"{parent_length % size} of {size} elements, and a device batch has one shape. "
            "Pass drop_remainder=True."
        )
    epoch, offset = divmod(bound, ds.length) if bound >= ds.length else (0, bound)
    last_row = epoch * parent_length + (offset + 1) * size - 1  # of the last batch it may read
    row_bound = min(last_row, parent_bound(ds.length, bound, parent_length))
    parent = c.compile(ds.parent, row_bound)
    rows = np.arange(size, dtype=c.mode.unsigned)
    unsigned = c.mode.unsigned.type
    wide_rows = wide_offsets(c.mode, parent_length, row_bound)

    def program(arrays: Sequence[Any], at: Split) -> Any:
        if wide_rows:  # 32-bit, rows past 2**32 - 1: offset * size + row on pairs of words
            first = wide.scale(at.offset, size)
            offsets: Any = wide.add(first.high, first.low, rows)
        else:
            offsets = at.offset * unsigned(size) + rows
        return jax.vmap(lambda offset: parent(arrays, Split(at.epoch, offset)))(offsets)

    return program


def _call(stage: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as error:
        error.add_note(f"(in {stage}, traced by to_jax: the function must be jax-traceable)")
        raise


RULES: dict[type, Any] = {
    RangeDataset: range_rule,
    SourceDataset: source_rule,
    MappedDataset: map_rule,
    IndexMappedDataset: map_with_index_rule,
    RandomMappedDataset: random_map_rule,
    BatchedDataset: batch_rule,
}
"""The device rule of each element-making stage."""
