"""Device rules of the stages that route each position to a component.

mix, concatenate and select_from_datasets.

A routed position reads one component; on device every component is compiled,
and `jax.lax.switch` picks the one a position reads (under `vmap` it computes
them all and selects, as XLA does for any batched branch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grainfn._src.device import wide
from grainfn._src.device.compiler import NotOnDeviceError
from grainfn._src.device.ints import (
    MAX_POSITION,
    Split,
    parent_bound,
    require,
    split,
    takes_wide_offsets,
    whole_position,
)
from grainfn._src.index import mixing
from grainfn._src.stages.mix import ConcatenatedDataset, MixedDataset, SelectedDataset

if TYPE_CHECKING:
    from grainfn._src.device.compiler import Compiler, Program

TABLE_LIMIT = 1 << 20
"""The most entries a routing table (one mix period, one selection map) may have."""


@takes_wide_offsets
def mix_rule(c: Compiler, ds: MixedDataset, bound: int) -> Program:
    """Position `k` of a mix, from its pattern's period.

    The pattern repeats every `period = sum(proportions)` positions, each
    repetition advancing component `i` by `proportions[i]`.

    With 32-bit integers and positions past 2**32, `k` and the component
    positions are computed on pairs of words (`grainfn._src.device.wide`).
    """
    proportions, period = ds.proportions, sum(ds.proportions)
    _check_table(period, ds, "one period of its pattern (the sum of its integer proportions)")
    components, keys = mixing.mix_indices(np.arange(period, dtype=np.int64), proportions)
    which = c.add(components.astype(np.int32))
    first_keys = c.add(keys.astype(c.mode.unsigned))
    shares = np.asarray(proportions, dtype=c.mode.unsigned)
    # Positions up to `bound` lie in periods up to bound // period: component i's keys
    # stay below (that + 1) * proportions[i].
    key_bounds = [min(MAX_POSITION, (bound // period + 1) * share - 1) for share in proportions]
    unsigned = c.mode.unsigned.type
    if bound < c.mode.limit:
        whole = whole_position(c.mode, ds, bound)
        programs = [_at_key(c, part, b) for part, b in zip(ds.components, key_bounds)]
        _check_alike(c, ds, programs, _scalar(c.mode.unsigned))

        def program(arrays: Sequence[Any], at: Split) -> Any:
            import jax.numpy as jnp

            position = whole(at)
            periods, inside = position // unsigned(period), position % unsigned(period)
            component = arrays[which][inside]
            key = periods * jnp.asarray(shares)[component] + arrays[first_keys][inside]
            return _switch(ds, component, programs, arrays, key)

        return program
    require(  # 32-bit: whole positions need two words, the epoch one
        bound // ds.length < c.mode.limit,
        ds.describe_stage(),
        f"its epochs reach {bound // ds.length}",
        c.mode,
    )
    wide_programs = [_at_wide_key(c, part, b) for part, b in zip(ds.components, key_bounds)]
    _check_alike(c, ds, wide_programs, wide.Wide(_scalar(np.uint32), _scalar(np.uint32)))

    def wide_program(arrays: Sequence[Any], at: Split) -> Any:
        import jax.numpy as jnp

        high, low = wide.whole(at.epoch, at.offset, ds.length)
        (periods_high, periods_low), inside = wide.divmod_small(high, low, period)
        component = arrays[which][inside]
        key = wide.multiply_pair(periods_high, periods_low, jnp.asarray(shares)[component])
        key = wide.add(*key, arrays[first_keys][inside])
        return _switch(ds, component, wide_programs, arrays, key)

    return wide_program


def concatenate_rule(c: Compiler, ds: ConcatenatedDataset, bound: int) -> Program:
    """Epoch `e` of a concatenation reads epoch `e` of each component in turn."""
    present = [component for component in ds.components if component.length]
    lengths = [component.length for component in present]
    starts = np.cumsum([0, *lengths[:-1]]).astype(c.mode.unsigned)
    programs = [
        c.compile(component, parent_bound(ds.length, bound, component.length))
        for component in present
    ]
    _check_alike(c, ds, programs, Split(_scalar(c.mode.unsigned), _scalar(c.mode.unsigned)))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        import jax.numpy as jnp

        component = jnp.searchsorted(starts, at.offset, side="right").astype(np.int32) - 1
        offset = at.offset - jnp.asarray(starts)[component]
        return _switch(ds, component, programs, arrays, Split(at.epoch, offset))

    return program


def select_rule(c: Compiler, ds: SelectedDataset, bound: int) -> Program:
    """A selection map is tabulated over its length on the host, once."""
    length = ds.length
    _check_table(length, ds, "its selection map")
    if bound >= length and _answers(ds.selection_map, length):
        raise _not_on_device(ds)
    pairs = [ds._select(index) for index in range(length)]
    components = np.array([p[0] for p in pairs], dtype=np.int32)
    keys = np.array([p[1] for p in pairs], dtype=object)
    programs = []
    for number, component in enumerate(ds.components):
        mine = keys[components == number]
        key_bound = int(mine.max()) if mine.size else 0
        require(
            key_bound < c.mode.limit,
            ds.describe_stage(),
            f"its selection map names position {key_bound}",
            c.mode,
        )
        programs.append(_at_key(c, component, key_bound))
    _check_alike(c, ds, programs, _scalar(c.mode.unsigned))
    which = c.add(components)
    positions = c.add(keys.astype(np.uint64).astype(c.mode.unsigned))

    def program(arrays: Sequence[Any], at: Split) -> Any:
        component = arrays[which][at.offset]
        return _switch(ds, component, programs, arrays, arrays[positions][at.offset])

    return program


def _at_key(c: Compiler, component: Any, bound: int) -> Callable[[Sequence[Any], Any], Any]:
    """A component's program taking a whole position (`key`) instead of a Split."""
    program = c.compile(component, bound)
    return lambda arrays, key: program(arrays, split(c.mode, key, component.length, bound))


def _at_wide_key(c: Compiler, component: Any, bound: int) -> Callable[[Sequence[Any], Any], Any]:
    """A component's program taking a whole position as a (high, low) pair of words."""
    if bound < c.mode.limit:  # the high word is 0: the low word is the key
        narrow = _at_key(c, component, bound)
        return lambda arrays, key: narrow(arrays, key[1])
    program, length = c.compile(component, bound), component.length
    return lambda arrays, key: program(arrays, split(c.mode, wide.Wide(*key), length, bound))


def _switch(
    ds: Any,
    component: Any,
    programs: list[Callable[[Sequence[Any], Any], Any]],
    arrays: Sequence[Any],
    where: Any,
) -> Any:
    """The element of the component `component` names, from `programs[component]`."""
    import jax

    if len(programs) == 1:
        return programs[0](arrays, where)
    branches = [lambda where, p=p: p(arrays, where) for p in programs]
    return jax.lax.switch(component, branches, where)


def _scalar(dtype: Any) -> Any:
    import jax

    return jax.ShapeDtypeStruct((), dtype)


def _check_alike(
    c: Compiler, ds: Any, programs: Sequence[Callable[[Sequence[Any], Any], Any]], where: Any
) -> None:
    """Refuses components whose elements differ in structure, shape or dtype.

    One device array holds every element, while on the host each element
    keeps its component's dtype: so nothing is promoted, and other dtypes are
    refused here, when `to_jax` is called. `where` describes a program's input.
    """
    import jax

    arrays = [jax.ShapeDtypeStruct(np.shape(a), np.dtype(a.dtype)) for a in c.arrays]
    shapes = [jax.eval_shape(lambda a, w, p=p: p(a, w), arrays, where) for p in programs]
    structures = {jax.tree_util.tree_structure(shape) for shape in shapes}
    leaf_shapes = {tuple(leaf.shape for leaf in jax.tree_util.tree_leaves(s)) for s in shapes}
    if len(structures) > 1 or len(leaf_shapes) > 1:
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: its components give elements of "
            f"different structures or shapes ({shapes}), which one device array cannot "
            "hold. Map them to one element structure first."
        )
    dtypes = [tuple(str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(s)) for s in shapes]
    if len(set(dtypes)) > 1:
        listed = "; ".join(f"component {i}: {', '.join(d)}" for i, d in enumerate(dtypes))
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: its components give leaves of "
            f"different dtypes ({listed}). On the host each element keeps its component's "
            "dtype, and one device array cannot, so nothing is promoted: map the components "
            "to one dtype first, e.g. fn.map(lambda x: x.astype(np.int32), component)."
        )


def _check_table(size: int, ds: Any, what: str) -> None:
    if size > TABLE_LIMIT:
        raise NotOnDeviceError(
            f"to_jax cannot run {ds.describe_stage()!r}: {what} has {size} entries, more "
            f"than the {TABLE_LIMIT} a device table may hold."
        )


def _answers(selection_map: Any, index: int) -> bool:
    try:
        selection_map[index]
    except IndexError:
        return False
    return True


def _not_on_device(ds: Any) -> Exception:
    return NotOnDeviceError(
        f"to_jax cannot run {ds.describe_stage()!r}: its selection map answers positions past "
        f"its length {ds.length}, which a table of one length cannot reproduce. Give it a "
        "selection map defined on [0, length) and repeat the selection instead."
    )


RULES: dict[type, Any] = {
    MixedDataset: mix_rule,
    ConcatenatedDataset: concatenate_rule,
    SelectedDataset: select_rule,
}
"""The device rule of each routing stage."""
