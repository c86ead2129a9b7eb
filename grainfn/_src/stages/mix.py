"""Stages that route each position to one of several components: mix, concatenate, select."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar, overload

import numpy as np

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_components
from grainfn._src.core.compiler import NotOnDeviceError, Program
from grainfn._src.core.dataset import INFINITE, Dataset, ParentIndex, set_length
from grainfn._src.core.grain_state import (
    Beneath,
    GrainState,
    OwnGrainState,
    read_components,
    read_count,
    read_field,
    read_flag,
    write_components,
)
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, Stream
from grainfn._src.index import mixing, slicing, wide
from grainfn._src.index.device_ints import (
    Split,
    parent_bound,
    require,
    split,
    whole_position,
)

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler

T = TypeVar("T")

MIX = RandomStage("mix", (ArgumentKind.COMPONENTS, ArgumentKind.OPTIONAL_WEIGHTS), in_grain=True)
"""How random pipelines draw a mix, of datasets or of streams: a head with optional weights."""


@dataclasses.dataclass(frozen=True, repr=False)
class _Selection(Dataset[Any]):
    """Base of stages that route each position to one of several components."""

    spec_rule = SpecRule.PARENT

    components: tuple[Dataset[Any], ...]

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return self.components

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _get(self, index: int) -> Any:
        component, key = self._route(np.array([index], dtype=np.int64))
        return self.components[int(component[0])]._get(int(key[0]))

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        which, keys = self._route(indices)
        return gather(self.components, which, keys)

    def trace_parent(self, index: int) -> ParentIndex:
        component, key = self._route(np.array([index], dtype=np.int64))
        return ParentIndex(int(component[0]), int(key[0]))


def gather(components: Sequence[Dataset[Any]], which: np.ndarray, keys: np.ndarray) -> list[Any]:
    """Reads `components[which[j]]` at `keys[j]` for every j, one block call per component."""
    if len(components) == 1:
        return components[0]._get_many(keys)
    # Group positions by component (stable, so each component reads its keys in
    # order), read each group in one call, then put the elements back in place
    # with one C-level gather instead of a Python loop over elements.
    order = np.argsort(which, kind="stable")
    grouped: list[Any] = []
    start = 0
    for component, count in enumerate(np.bincount(which, minlength=len(components)).tolist()):
        if count:
            grouped.extend(components[component]._get_many(keys[order[start : start + count]]))
            start += count
    if len(grouped) == 1:
        return grouped
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return list(operator.itemgetter(*inverse.tolist())(grouped))


@dataclasses.dataclass(frozen=True, repr=False)
class MixedDataset(_Selection):
    """Interleaves components in fixed proportions; ends where the first runs out."""

    random_stage = MIX
    takes_wide_offsets = True  # its device form takes Wide offsets

    weights: tuple[float, ...]
    proportions: tuple[int, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        proportions = mixing.int_proportions(self.weights)
        object.__setattr__(self, "proportions", proportions)
        set_length(self, mixing.mix_length([c.length for c in self.components], proportions))

    def _get(self, index: int) -> Any:
        component, key = mixing.mix_index(index, self.proportions)
        return self.components[component]._get(key)

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return mixing.mix_indices(indices, self.proportions)

    def describe_stage(self) -> str:
        return f"mix(weights={list(self.weights)})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(*mixing.mix_index(index, self.proportions))

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        """Position `k` of a mix, from its pattern's period.

        The pattern repeats every `period = sum(proportions)` positions, each
        repetition advancing component `i` by `proportions[i]`.

        With 32-bit integers and positions past 2**32, `k` and the component
        positions are computed on pairs of words (`grainfn._src.index.wide`).
        """
        proportions, period = self.proportions, sum(self.proportions)
        _check_table(period, self, "one period of its pattern (the sum of its integer proportions)")
        components, keys = mixing.mix_indices(np.arange(period, dtype=np.int64), proportions)
        which = compiler.add(components.astype(np.int32))
        first_keys = compiler.add(keys.astype(compiler.mode.unsigned))
        shares = np.asarray(proportions, dtype=compiler.mode.unsigned)
        # Positions up to `bound` lie in periods up to bound // period: component i's keys
        # stay below (that + 1) * proportions[i].
        key_bounds = [
            min(slicing.MAX_POSITION, (bound // period + 1) * share - 1) for share in proportions
        ]
        unsigned = compiler.mode.unsigned.type
        if bound < compiler.mode.limit:
            whole = whole_position(compiler.mode, self, bound)
            programs = [_at_key(compiler, part, b) for part, b in zip(self.components, key_bounds)]
            _check_alike(compiler, self, programs, _scalar(compiler.mode.unsigned))

            def route(arrays: Sequence[Any], at: Split) -> tuple[Any, Any]:
                import jax.numpy as jnp

                position = whole(at)
                periods, inside = position // unsigned(period), position % unsigned(period)
                component = arrays[which][inside]
                key = periods * jnp.asarray(shares)[component] + arrays[first_keys][inside]
                return component, key

            return _routed(route, programs)
        require(  # 32-bit: whole positions need two words, the epoch one
            bound // self.length < compiler.mode.limit,
            self.describe_stage(),
            f"its epochs reach {bound // self.length}",
            compiler.mode,
        )
        wide_programs = [
            _at_wide_key(compiler, part, b) for part, b in zip(self.components, key_bounds)
        ]
        _check_alike(
            compiler, self, wide_programs, wide.Wide(_scalar(np.uint32), _scalar(np.uint32))
        )

        def wide_route(arrays: Sequence[Any], at: Split) -> tuple[Any, Any]:
            import jax.numpy as jnp

            high, low = wide.whole(at.epoch, at.offset, self.length)
            (periods_high, periods_low), inside = wide.divmod_small(high, low, period)
            component = arrays[which][inside]
            key = wide.multiply_pair(periods_high, periods_low, jnp.asarray(shares)[component])
            return component, wide.add(*key, arrays[first_keys][inside])

        return _routed(wide_route, wide_programs)


@dataclasses.dataclass(frozen=True, repr=False)
class ConcatenatedDataset(_Selection):
    """Components one after another; epoch e reads epoch e of each."""

    random_stage = RandomStage("concatenate", (ArgumentKind.COMPONENTS,), in_grain=True)

    def __post_init__(self) -> None:
        set_length(self, sum(c.length for c in self.components))

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        longest = max(c.length for c in self.components)
        slicing.check_addressable(int(indices.max()), self.length, longest)
        return mixing.concat_indices(indices, [c.length for c in self.components])

    def describe_stage(self) -> str:
        return f"concatenate({len(self.components)} datasets)"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        """Epoch `e` of a concatenation reads epoch `e` of each component in turn."""
        present = [component for component in self.components if component.length]
        lengths = [component.length for component in present]
        starts = np.cumsum([0, *lengths[:-1]]).astype(compiler.mode.unsigned)
        programs = [
            compiler.compile(component, parent_bound(self.length, bound, component.length))
            for component in present
        ]
        _check_alike(
            compiler,
            self,
            programs,
            Split(_scalar(compiler.mode.unsigned), _scalar(compiler.mode.unsigned)),
        )

        def route(arrays: Sequence[Any], at: Split) -> tuple[Any, Split]:
            import jax.numpy as jnp

            component = jnp.searchsorted(starts, at.offset, side="right").astype(np.int32) - 1
            offset = at.offset - jnp.asarray(starts)[component]
            return component, Split(at.epoch, offset)

        return _routed(route, programs)


@dataclasses.dataclass(frozen=True, repr=False)
class SelectedDataset(_Selection):
    """Components chosen by a selection map: position -> (component, index)."""

    # Not drawn: its selection map is the user's own table, which `take` draws (over one).
    random_stage = RandomStage(
        "select_from_datasets",
        (ArgumentKind.COMPONENTS, ArgumentKind.SELECTION_MAP),
        in_grain=True,
        drawn=False,
    )
    selection_map: Any

    def __post_init__(self) -> None:
        set_length(self, validate.check_length(self.selection_map, "the selection_map"))

    def _get(self, index: int) -> Any:
        component, key = self._select(index)
        return self.components[component]._get(key)

    def _route(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [self._select(i) for i in indices.tolist()]
        which = np.fromiter((c for c, _ in pairs), dtype=np.int64, count=len(pairs))
        keys = np.fromiter((k for _, k in pairs), dtype=np.int64, count=len(pairs))
        return which, keys

    def _select(self, index: int) -> tuple[int, int]:
        try:
            pair = self.selection_map[index]
        except Exception as error:  # the user's map: keeps its type, gains a note
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise
        try:
            component, key = pair
            if 0 <= component < len(self.components) and 0 <= key <= validate.INT64_MAX:
                return operator.index(component), operator.index(key)
        except (TypeError, ValueError):
            pass
        raise _bad_selection(pair, index, len(self.components))

    def describe_stage(self) -> str:
        return f"select_from_datasets({type(self.selection_map).__name__})"

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(*self._select(index))

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        """A selection map is tabulated over its length on the host, once."""
        length = self.length
        _check_table(length, self, "its selection map")
        if bound >= length and _answers(self.selection_map, length):
            raise _not_on_device(self)
        pairs = [self._select(index) for index in range(length)]
        components = np.array([p[0] for p in pairs], dtype=np.int32)
        keys = np.array([p[1] for p in pairs], dtype=object)
        programs = []
        for number, component in enumerate(self.components):
            mine = keys[components == number]
            key_bound = int(mine.max()) if mine.size else 0
            require(
                key_bound < compiler.mode.limit,
                self.describe_stage(),
                f"its selection map names position {key_bound}",
                compiler.mode,
            )
            programs.append(_at_key(compiler, component, key_bound))
        _check_alike(compiler, self, programs, _scalar(compiler.mode.unsigned))
        which = compiler.add(components)
        positions = compiler.add(keys.astype(np.uint64).astype(compiler.mode.unsigned))

        def route(arrays: Sequence[Any], at: Split) -> tuple[Any, Any]:
            return arrays[which][at.offset], arrays[positions][at.offset]

        return _routed(route, programs)


def _bad_selection(pair: Any, index: int, count: int) -> Exception:
    """The error for a selection_map entry that is not a (dataset index, index) pair in range."""
    allowed = f"(dataset index in [0, {count}), index in [0, 2**63 - 1])"
    got = f"selection_map[{index}] returned {validate.short_repr(pair)}"
    try:
        component, key = pair
        component, key = operator.index(component), operator.index(key)
    except (TypeError, ValueError):
        return TypeError(f"{got}; it must return a pair of integers {allowed}.")
    return IndexError(f"{got}; it must return {allowed}.")


@records.register
class MixState(NamedTuple):
    """State of a stream `mix`: the next mixed position, whether it ended, and each component."""

    position: int
    stopped: bool
    components: tuple[Any, ...]


def _read_grain_state(stream: MixedStream, grains: Any, path: str, beneath: Beneath) -> MixState:
    """Grain's `{"parents", "index", "stop"}`; a mix of named components keys them by name."""
    parents = read_field(grains, "parents", path)
    if isinstance(parents, dict) and stream.names is not None:
        parents = [parents.get(name) for name in stream.names]
    components = read_components(stream.components, parents, path, beneath)
    return MixState(read_count(grains, "index", path), read_flag(grains, "stop", path), components)


def _write_grain_state(
    stream: MixedStream, record: MixState, path: str, beneath: Beneath
) -> dict[str, Any]:
    parents: Any = write_components(stream.components, record.components, path, beneath)
    if stream.names is not None:  # Grain keys a mix of named components by name
        parents = dict(sorted(zip(stream.names, parents)))
    return {"parents": parents, "index": record.position, "stop": record.stopped}


@dataclasses.dataclass(frozen=True, repr=False)
class MixedStream(Stream[Any]):
    """Interleaves component streams in fixed proportions; stops when the one due runs out."""

    spec_rule = SpecRule.PARENT
    random_stage = MIX
    grain_state: ClassVar[GrainState | None] = OwnGrainState(
        "IterDataset.mix", _read_grain_state, _write_grain_state
    )

    components: tuple[Stream[Any], ...]
    weights: tuple[float, ...]
    names: tuple[str, ...] | None = None
    proportions: tuple[int, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "proportions", mixing.int_proportions(self.weights))

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.components

    def init(self) -> MixState:
        return MixState(0, False, tuple(c.init() for c in self.components))

    def open(self, state: MixState) -> Cursor:
        cursors = [c.open(s) for c, s in zip(self.components, state.components)]
        return _MixCursor(cursors, self.proportions, state.position, state.stopped)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, MixState, self.describe_stage(), path)
        where = f"{path}.components" if path else "components"
        if not isinstance(state.components, tuple) or len(state.components) != len(self.components):
            raise ValueError(
                f"State field {where} must hold {len(self.components)} component states, "
                f"got {records.describe_value(state.components)}."
            )
        for i, (component, sub) in enumerate(zip(self.components, state.components)):
            component.check_state(sub, f"{where}[{i}]")
        bounds = [c.most_delivered(s) for c, s in zip(self.components, state.components)]
        if all(bound is not None for bound in bounds):  # the stop read one more position
            bound = sum(b for b in bounds if b is not None) + int(state.stopped)
            records.check_at_most(state.position, bound, path, "position", "its components' states")

    def most_delivered(self, state: MixState) -> int:
        return state.position

    def describe_stage(self) -> str:
        if self.names is not None:
            return f"mix({dict(zip(self.names, self.weights))})"
        return f"mix(weights={list(self.weights)})"


class _MixCursor(BaseCursor):
    def __init__(
        self, cursors: list[Cursor], proportions: tuple[int, ...], index: int, stopped: bool
    ) -> None:
        self.cursors, self.index, self.stopped = cursors, index, stopped
        self.pattern = mixing.mix_pattern(proportions)
        self.atomic = all(cursor.atomic for cursor in cursors)

    def next(self) -> Any:
        if self.stopped:
            raise StopIteration
        component = self.pattern(self.index)
        try:
            element = self.cursors[component].next()
        except StopIteration:
            self.index += 1
            self.stopped = True
            raise
        self.index += 1  # only once the component gave it: a failure changes nothing
        return element

    def state(self) -> Any:
        return MixState(self.index, self.stopped, tuple(c.state() for c in self.cursors))

    def children(self) -> tuple[Cursor, ...]:
        return tuple(self.cursors)


@overload
def mix(datasets: Sequence[Dataset[T]], weights: Sequence[float] | None = None) -> Dataset[T]: ...


@overload
def mix(
    datasets: Sequence[Stream[T]] | Mapping[str, Stream[T]],
    weights: Sequence[float] | Mapping[str, float] | None = None,
) -> Stream[T]: ...


def mix(
    datasets: Sequence[Data] | Mapping[str, Data],
    weights: Sequence[float] | Mapping[str, float] | None = None,
) -> Data:
    """Interleaves datasets (or streams) in proportion to `weights`, uniform by default.

    A mix of datasets ends where its first component would run out. A mix of
    streams stops when the component due next is exhausted (Grain's rule);
    streams may also be given as a dict of named components, with weights as a
    dict of the same names, or as a list in the dict's own order. Named
    components take turns in the order of their sorted names, as in Grain.

    Examples:
        >>> from grainfn.fn import from_dataset, source
        >>> from grainfn import fn
        >>> mix([fn.range(5), fn.range(7, 10)]).get_many(range(6))
        [0, 7, 1, 8, 2, 9]
        >>> from grainfn.fn import iterate
        >>> b, a = from_dataset(source("b" * 8)), from_dataset(source("a" * 8))
        >>> "".join(iterate(mix({"b": b, "a": a}, [3, 1])))  # b: 3, a: 1
        'abbbabbbabb'
    """
    names: tuple[str, ...] | None = None
    if isinstance(datasets, Mapping):
        names = tuple(sorted(datasets))
        if weights is not None and not isinstance(weights, Mapping):
            weights = dict(zip(datasets, validate.check_weights(weights, len(datasets))))
        datasets = [datasets[name] for name in names]
        if isinstance(weights, Mapping):
            if set(weights) != set(names):
                raise ValueError(
                    f"weights must name the same components as the datasets: "
                    f"got {sorted(weights)} for {list(names)}."
                )
            weights = [weights[name] for name in names]
    elif isinstance(weights, Mapping):
        raise TypeError("weights may be a dict only when the datasets are a dict of named streams.")
    components = as_components(datasets, "mix")
    weights = (1.0,) * len(components) if weights is None else weights
    checked = validate.check_weights(weights, len(components))
    if isinstance(components[0], Stream):
        return MixedStream(components, checked, names)
    if names is not None:
        raise TypeError("Named components are for streams; mix datasets as a list.")
    for position, component in enumerate(components):
        if component.length == 0:
            raise ValueError(
                f"Cannot mix an empty dataset: the dataset at position {position} has length 0."
            )
    return MixedDataset(components, checked)


def concatenate(datasets: Sequence[Dataset[T]]) -> Dataset[T]:
    """The datasets one after another; epoch e of the result reads epoch e of each.

    Examples:
        >>> from grainfn import fn
        >>> concatenate([fn.range(2), fn.range(5, 7)]).get_many(range(5))
        [0, 1, 5, 6, 0]
    """
    components = as_components(datasets, "concatenate", streams=False)
    for position, component in enumerate(components):
        if component.length >= INFINITE:
            raise ValueError(
                f"Cannot concatenate an infinite dataset (position {position}); "
                "concatenate finite datasets and repeat the result instead."
            )
    total = sum(component.length for component in components)
    if total >= INFINITE:
        raise ValueError(
            f"Cannot concatenate datasets of lengths {[c.length for c in components]}: "
            f"together they have {total} positions, past the 2**63 - 2 a finite dataset may have."
        )
    return ConcatenatedDataset(components)


def select_from_datasets(datasets: Sequence[Dataset[T]], selection_map: Any) -> Dataset[T]:
    """Position `i` reads `datasets[d][k]` where `(d, k) = selection_map[i]`.

    `selection_map` needs `len()` (the length of the result) and `[]`.
    """
    components = as_components(datasets, "select_from_datasets", streams=False)
    if not (hasattr(selection_map, "__len__") and hasattr(selection_map, "__getitem__")):
        raise TypeError(
            f"selection_map must support len() and [] returning (dataset index, index), "
            f"got {validate.short_repr(selection_map)}."
        )
    return SelectedDataset(components, selection_map)


# Device forms: a routed position reads one component; on device every component is
# compiled, and `jax.lax.switch` picks the one a position reads (under `vmap` it computes
# them all and selects, as XLA does for any batched branch).

TABLE_LIMIT = 1 << 20
"""The most entries a device routing table (one mix period, one selection map) may have."""


def _at_key(c: Compiler, component: Any, bound: int) -> Program:
    """A component's program taking a whole position (`key`) instead of a Split."""
    program = c.compile(component, bound)
    return program.at(lambda arrays, key: split(c.mode, key, component.length, bound))


def _at_wide_key(c: Compiler, component: Any, bound: int) -> Program:
    """A component's program taking a whole position as a (high, low) pair of words."""
    if bound < c.mode.limit:  # the high word is 0: the low word is the key
        return _at_key(c, component, bound).at(lambda arrays, key: key[1])
    program, length = c.compile(component, bound), component.length
    return program.at(lambda arrays, key: split(c.mode, wide.Wide(*key), length, bound))


Route = Callable[[Sequence[Any], Split], tuple[Any, Any]]
"""`(arrays, at) -> (component, where)`: the component a position reads, and where in it."""


def _routed(route: Route, programs: list[Program]) -> Program:
    """The element of component `programs[c]` at `where`, for `(c, where) = route(arrays, at)`.

    The addresses are `c` and every component's addresses, the others'
    zeros: one array of addresses holds positions of different components.
    Only the chosen component's index math runs (`lax.switch`), and only
    its reads.
    """
    import jax

    if len(programs) == 1:
        return programs[0].at(lambda arrays, at: route(arrays, at)[1])

    def resolve(arrays: Sequence[Any], at: Split) -> tuple[Any, tuple[Any, ...]]:
        component, where = route(arrays, at)
        shapes = [jax.eval_shape(p.resolve, arrays, where) for p in programs]

        def chosen(mine: int) -> Callable[[Any], tuple[Any, ...]]:
            def addresses(where: Any) -> tuple[Any, ...]:
                return tuple(
                    program.resolve(arrays, where) if other == mine else _zeros(shape, component)
                    for other, (program, shape) in enumerate(zip(programs, shapes))
                )

            return addresses

        branches = [chosen(mine) for mine in range(len(programs))]
        return component, jax.lax.switch(component, branches, where)

    def read(arrays: Sequence[Any], addresses: tuple[Any, tuple[Any, ...]]) -> Any:
        component, each = addresses
        readers = [lambda each, p=p, i=i: p.read(arrays, each[i]) for i, p in enumerate(programs)]
        return jax.lax.switch(component, readers, each)

    return Program(resolve, read)


def _zeros(shapes: Any, like: Any) -> Any:
    """Zeros of `shapes` (a pytree of ShapeDtypeStructs), computed from `like`.

    Computed from a value rather than made as constants, so that inside
    `shard_map` they vary over the same mesh axes as `like`, as the chosen
    branch's addresses do (`lax.switch` wants its branches' types equal).
    """
    import jax
    import jax.numpy as jnp

    zero = like * 0
    return jax.tree_util.tree_map(lambda s: jnp.broadcast_to(zero.astype(s.dtype), s.shape), shapes)


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
