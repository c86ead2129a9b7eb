"""Random pipelines for property tests: specs that hypothesis can generate, shrink and print.

A spec is a plain tuple, e.g. `(("range", 10), ("seed", 3), ("shuffle", None),
("batch", 4, False))`: a head (`range`, `mix` or `concatenate` of sub-specs)
then stages. `build_dataset` and `build_stream` turn a spec into grainfn values;
the stage functions are module-level, so built pipelines pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.stream import Stream, stage_kinds


def add_one(x: Any) -> Any:
    """X + 1."""
    return x + 1


def square_mod(x: Any) -> Any:
    """X * x modulo 1009."""
    small = x % 1009  # keeps the square far from int64 overflow
    return (small * small) % 1009


def with_index(i: int, x: Any) -> Any:
    """3 * x + i, both taken modulo 1009 (positions can be near 2**63)."""
    return (x % 1009) * 3 + i % 1009


def add_draw(x: Any, rng: np.random.Generator) -> Any:
    """X plus a random integer in [0, 1000)."""
    return x + rng.integers(0, 1000)


def add_uniform(x: Any, rng: np.random.Generator) -> Any:
    """X plus a random float in [0, 1)."""
    return x + rng.random()


def add_key_draw(x: Any, key: Any) -> Any:
    """X plus a random int32 in [0, 1000) drawn with a `jax.random` key (rng="jax")."""
    import jax
    import jax.numpy as jnp

    return x + jax.random.randint(key, (), 0, 1000, dtype=jnp.int32)


def keep_mostly(x: Any) -> bool:
    """Keeps about two thirds of the elements, and None holes."""
    # Grain calls stream-level predicates on None holes too; these keep them.
    return x is None or bool(int(np.sum(x)) % 3 != 0)


def keep_even(x: Any) -> bool:
    """Keeps elements with an even sum, and None holes."""
    return x is None or bool(int(np.sum(x)) % 2 == 0)


MAPS = {"add_one": add_one, "square_mod": square_mod}
RANDOM_MAPS = {"add_draw": add_draw, "add_uniform": add_uniform}
FILTERS = {"keep_mostly": keep_mostly, "keep_even": keep_even}


@dataclasses.dataclass(frozen=True)
class Functions:
    """The element functions random pipelines draw from, by name.

    An empty table leaves its stage kind out; `with_index` says whether
    `map_with_index` (with `with_index`, on integers) may appear.
    """

    maps: Mapping[str, Callable[[Any], Any]] = dataclasses.field(default_factory=lambda: MAPS)
    random_maps: Mapping[str, Callable[[Any, np.random.Generator], Any]] = dataclasses.field(
        default_factory=lambda: RANDOM_MAPS
    )
    filters: Mapping[str, Callable[[Any], bool]] = dataclasses.field(
        default_factory=lambda: FILTERS
    )
    with_index: bool = True

    def element_kinds(self) -> list[str]:
        """The element stage kinds these functions allow."""
        tables = (("map", self.maps), ("random_map", self.random_maps), ("filter", self.filters))
        kinds = [kind for kind, table in tables if table]
        return kinds + (["map_with_index"] if self.with_index else [])


INTEGERS = Functions()
"""The functions of the default pipelines, over `fn.range`'s integers."""

seeds = st.integers(0, 2**32 - 1)
optional_seeds = st.one_of(st.none(), seeds)

Draw = Callable[..., Any]
"""Hypothesis's `draw` of a composite strategy."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """A stage random pipelines hold: how its spec's arguments are drawn, how it is built.

    `draw(draw, functions, level)` gives the arguments (`level` is "dataset"
    or "stream"); `build(data, arguments, functions)` applies the stage.
    """

    draw: Callable[[Draw, Functions, str], tuple[Any, ...]]
    build: Callable[[Any, tuple[Any, ...], Functions], Any]


def _slice_arguments(draw: Draw, functions: Functions, level: str) -> tuple[Any, ...]:
    bound = st.one_of(st.none(), st.integers(-12, 12))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return (draw(bound), draw(bound), draw(step))


def _repeat_arguments(draw: Draw, functions: Functions, level: str) -> tuple[Any, ...]:
    if level == "stream":
        return (draw(st.integers(1, 3)),)
    return (draw(st.one_of(st.none(), st.integers(1, 3))), draw(st.booleans()))


def _repeat(data: Any, arguments: tuple[Any, ...], functions: Functions) -> Any:
    if len(arguments) == 1:  # a stream's
        return fn.repeat(arguments[0], data)
    return fn.repeat(arguments[0], data, reseed_each_epoch=arguments[1])


def _take(data: Any, arguments: tuple[Any, ...], functions: Functions) -> Any:
    return fn.slice([p % data.length for p in arguments[0]] if data.length else [], data)


def _named(table: str) -> Callable[[Draw, Functions, str], tuple[Any, ...]]:
    """Draws the name of one of `functions`' `table` (maps, random_maps, filters)."""
    return lambda draw, functions, level: (
        draw(st.sampled_from(sorted(getattr(functions, table)))),
    )


KINDS: dict[str, Kind] = {
    "seed": Kind(lambda draw, f, level: (draw(seeds),), lambda x, a, f: fn.seed(a[0], x)),
    "shuffle": Kind(
        lambda draw, f, level: (draw(optional_seeds),), lambda x, a, f: fn.shuffle(x, seed=a[0])
    ),
    "window_shuffle": Kind(
        lambda draw, f, level: (draw(st.integers(1, 12)), draw(optional_seeds)),
        lambda x, a, f: fn.window_shuffle(a[0], x, seed=a[1]),
    ),
    "slice": Kind(_slice_arguments, lambda x, a, f: fn.slice(slice(*a), x)),
    "take": Kind(
        lambda draw, f, level: (tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))),),
        _take,
    ),
    "repeat": Kind(_repeat_arguments, _repeat),
    "map": Kind(_named("maps"), lambda x, a, f: fn.map(f.maps[a[0]], x)),
    "random_map": Kind(
        lambda draw, f, level: (*_named("random_maps")(draw, f, level), draw(optional_seeds)),
        lambda x, a, f: fn.random_map(f.random_maps[a[0]], x, seed=a[1]),
    ),
    "random_map_jax": Kind(
        lambda draw, f, level: (draw(seeds),),
        lambda x, a, f: fn.random_map(add_key_draw, x, seed=a[0], rng="jax"),
    ),
    "map_with_index": Kind(
        lambda draw, f, level: (), lambda x, a, f: fn.map_with_index(with_index, x)
    ),
    "filter": Kind(_named("filters"), lambda x, a, f: fn.filter(f.filters[a[0]], x)),
    "batch": Kind(
        lambda draw, f, level: (draw(st.integers(1, 5)), draw(st.booleans())),
        lambda x, a, f: fn.batch(a[0], x, drop_remainder=a[1]),
    ),
    "limit": Kind(
        lambda draw, f, level: (draw(st.integers(1, 30)),), lambda x, a, f: fn.limit(a[0], x)
    ),
}
"""Every stage random pipelines hold by a rule of their own, by its spec's name; a stage that
declares `random_stage` in its module joins them through `declared_kinds`."""


def _drop_level(
    draw_arguments: Callable[[Draw, Functions, str], tuple[Any, ...]],
) -> Callable[[Draw, Functions], Any]:
    return lambda draw, functions: draw_arguments(draw, functions, "stream")[0]


@dataclasses.dataclass(frozen=True)
class Argument:
    """A kind of argument a declared stage takes: how it is drawn and what it becomes."""

    draw: Callable[[Draw, Functions], Any]
    resolve: Callable[[Any, Functions], Any]
    table: str | None = None
    """The table of `Functions` it names an entry of; empty, the stage is left out."""


ARGUMENTS: dict[str, Argument] = {
    "predicate": Argument(
        _drop_level(_named("filters")), lambda name, f: f.filters[name], "filters"
    ),
    "map": Argument(_drop_level(_named("maps")), lambda name, f: f.maps[name], "maps"),
    "seed": Argument(lambda draw, f: draw(seeds), lambda value, f: value),
    "count": Argument(lambda draw, f: draw(st.integers(1, 30)), lambda value, f: value),
}
"""The kinds of argument a stage's `random_stage` declaration names, by name."""


def declared_kinds(functions: Functions = INTEGERS) -> dict[str, Kind]:
    """The stream stages of grainfn that declare `random_stage`, as rows like KINDS', by name.

    A stage whose arguments name an empty table of `functions` is left out.

    Examples:
        >>> "take_while" in declared_kinds()
        True
    """
    found = {}
    for kind in stage_kinds():
        declared = kind.random_stage
        if declared is None:
            continue
        arguments = [ARGUMENTS[name] for name in declared.arguments]
        if all(a.table is None or getattr(functions, a.table) for a in arguments):
            found[declared.function] = _declared_kind(declared.function, tuple(arguments))
    return found


def _declared_kind(function: str, arguments: tuple[Argument, ...]) -> Kind:
    def build(data: Any, values: tuple[Any, ...], functions: Functions) -> Any:
        resolved = (a.resolve(value, functions) for a, value in zip(arguments, values))
        return getattr(fn, function)(*resolved, data)

    return Kind(lambda draw, f, level: tuple(a.draw(draw, f) for a in arguments), build)


def draw_op(draw: Draw, kinds: list[str], functions: Functions, level: str) -> tuple[Any, ...]:
    """A spec `(kind, *arguments)` of one of `kinds` (keys of KINDS or declared)."""
    name = draw(st.sampled_from(kinds))
    kind = KINDS.get(name) or declared_kinds(functions)[name]
    return (name, *kind.draw(draw, functions, level))


def apply_op(op: tuple[Any, ...], data: Any, functions: Functions = INTEGERS) -> Any:
    """`data` through the stage of a spec from `draw_op`."""
    name, *arguments = op
    kind = KINDS.get(name) or declared_kinds(functions)[name]
    return kind.build(data, tuple(arguments), functions)


@st.composite
def unary_op(
    draw: Any, allow_batch: bool = True, functions: Functions = INTEGERS
) -> tuple[Any, ...]:
    """One map-level stage spec."""
    kinds = ["seed", "shuffle", "slice", "take", "repeat", *functions.element_kinds()]
    return draw_op(draw, kinds + (["batch"] if allow_batch else []), functions, "dataset")


@st.composite
def dataset_specs(
    draw: Any,
    depth: int = 2,
    functions: Functions = INTEGERS,
    sources: st.SearchStrategy[Dataset] | None = None,
) -> tuple[Any, ...]:
    """Specs of random map-level pipelines; some are invalid (e.g. batch after filter).

    Each leaf is `fn.range` of 1 to 40 integers, or a dataset drawn from
    `sources`, held in the spec as `("source", dataset)`.
    """
    if depth > 0 and draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(["mix", "concatenate"]))
        part = dataset_specs(depth=depth - 1, functions=functions, sources=sources)
        parts = tuple(draw(st.lists(part, min_size=1, max_size=3)))
        if kind == "mix":
            weights = draw(
                st.one_of(
                    st.none(),
                    st.lists(st.floats(0.1, 5.0), min_size=len(parts), max_size=len(parts)).map(
                        tuple
                    ),
                )
            )
            head: tuple[Any, ...] = ("mix", parts, weights)
        else:
            head = ("concatenate", parts)
    elif sources is not None:
        head = ("source", draw(sources))
    else:
        head = ("range", draw(st.integers(1, 40)))
    ops = draw(st.lists(unary_op(functions=functions), max_size=5))
    if draw(st.booleans()):
        ops.insert(0, ("seed", draw(seeds)))
    return (head, *ops)


def build_dataset(spec: tuple[Any, ...], functions: Functions = INTEGERS) -> Dataset:
    """The grainfn dataset of a spec from `dataset_specs`, its functions from `functions`."""
    head, *ops = spec
    if head[0] == "range":
        ds = fn.range(head[1])
    elif head[0] == "source":
        ds = head[1]
    elif head[0] == "mix":
        ds = fn.mix([build_dataset(p, functions) for p in head[1]], head[2])
    else:
        ds = fn.concatenate([build_dataset(p, functions) for p in head[1]])
    for op in ops:
        ds = apply_op(op, ds, functions)
    return ds


# Streams: a dataset spec read in order, then stream-level stages.


@st.composite
def stream_op(
    draw: Any, functions: Functions = INTEGERS, grain_only: bool = False
) -> tuple[Any, ...]:
    """One stream-level stage spec; of the stages Grain has too, with `grain_only`."""
    kinds = ["seed", *functions.element_kinds(), "batch", "limit", "repeat"]
    if not grain_only:
        kinds += list(declared_kinds(functions))
    return draw_op(draw, kinds, functions, "stream")


@st.composite
def stream_specs(
    draw: Any,
    depth: int = 1,
    functions: Functions = INTEGERS,
    sources: st.SearchStrategy[Dataset] | None = None,
    grain_only: bool = False,
) -> tuple[Any, ...]:
    """Specs of finite streams; with `grain_only`, of stages Grain has too.

    `(("stream", dataset_spec, allow_nones), *stream_ops)` or a mix of stream
    specs with optional weights, followed by stream stages.
    """
    if depth > 0 and draw(st.integers(0, 3)) == 0:
        part = stream_specs(depth - 1, functions, sources, grain_only)
        parts = tuple(draw(st.lists(part, min_size=1, max_size=3)))
        weights = draw(
            st.one_of(
                st.none(),
                st.lists(st.floats(0.1, 5.0), min_size=len(parts), max_size=len(parts)).map(tuple),
            )
        )
        head: tuple[Any, ...] = ("mix", parts, weights)
    else:
        base_specs = dataset_specs(depth=1, functions=functions, sources=sources)
        base = draw(base_specs.filter(lambda s: not _infinite(s)))
        head = ("stream", base, draw(st.booleans()))
    ops = draw(st.lists(stream_op(functions, grain_only), max_size=5))
    if draw(st.booleans()):
        ops.insert(0, ("seed", draw(seeds)))
    return (head, *ops)


def _infinite(spec: tuple[Any, ...]) -> bool:
    head = spec[0]
    return (
        any(op[0] == "repeat" and op[1] is None for op in spec[1:])
        or (head[0] in ("mix", "concatenate") and any(_infinite(p) for p in head[1]))
        or (head[0] == "source" and head[1].length >= INFINITE)
    )


def build_stream(spec: tuple[Any, ...], functions: Functions = INTEGERS) -> Stream:
    """The grainfn stream of a spec from `stream_specs`, its functions from `functions`."""
    head, *ops = spec
    if head[0] == "mix":
        stream = fn.mix([build_stream(p, functions) for p in head[1]], head[2])
    else:
        stream = fn.from_dataset(build_dataset(head[1], functions), allow_nones=head[2])
    for op in ops:
        stream = apply_op(op, stream, functions)
    return stream
