"""Random pipelines for property tests: specs that hypothesis can generate, shrink and print.

A spec is a plain tuple, e.g. `(("range", 10), ("seed", 3), ("shuffle", None),
("batch", 4, False))`: a head (`range`, `mix` or `concatenate` of sub-specs)
then stages. The stages are those that declare `random_stage` in their own
modules (`grainfn._src.core.random_stage`), found by `declared_kinds`; each
stage's spec holds the values of its arguments, drawn by their kinds
(`ARGUMENTS`). `build_dataset` and `build_stream` turn a spec into grainfn
values; the stage functions are module-level, so built pipelines pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.dataset import INFINITE, Dataset, dataset_kinds
from grainfn._src.core.random_stage import ArgumentKind, RandomStage, random_stages
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

    An empty table leaves out the stages whose arguments name one of it;
    `with_index` says whether `map_with_index` (with `with_index`, on
    integers) may appear, and `jax_draws` whether `random_map` with jax keys
    (`add_key_draw`, on integers: the device's pipelines) may.
    """

    maps: Mapping[str, Callable[[Any], Any]] = dataclasses.field(default_factory=lambda: MAPS)
    random_maps: Mapping[str, Callable[[Any, np.random.Generator], Any]] = dataclasses.field(
        default_factory=lambda: RANDOM_MAPS
    )
    filters: Mapping[str, Callable[[Any], bool]] = dataclasses.field(
        default_factory=lambda: FILTERS
    )
    with_index: bool = True
    jax_draws: bool = False


INTEGERS = Functions()
"""The functions of the default pipelines, over `fn.range`'s integers."""

seeds = st.integers(0, 2**32 - 1)
optional_seeds = st.one_of(st.none(), seeds)

Draw = Callable[..., Any]
"""Hypothesis's `draw` of a composite strategy."""

Level = Literal["dataset", "stream"]
"""Where a stage is drawn: on a map-level dataset, or on a stream."""


@dataclasses.dataclass(frozen=True)
class Argument:
    """How random pipelines draw one kind of argument, and what a drawn value becomes.

    Attributes:
        values: The strategy of its values in a spec, a tuple of `width` of them.
        resolve: `(values, functions, data) -> argument` of the stage's function.
        allowed: Whether `functions` allow it (an empty table of them does not).
        width: How many values a spec holds for it.
    """

    values: Callable[[Functions], st.SearchStrategy[tuple[Any, ...]]]
    resolve: Callable[[tuple[Any, ...], Functions, Any], Any] = lambda values, f, data: values[0]
    allowed: Callable[[Functions], bool] = lambda functions: True
    width: int = 1


def _one(strategy: st.SearchStrategy[Any]) -> Callable[[Functions], st.SearchStrategy[Any]]:
    """Draws one value of `strategy`, whatever the functions."""
    return lambda functions: st.tuples(strategy)


def _named(table: str) -> Argument:
    """The name of one of `functions`' `table` (maps, random_maps, filters); its function."""
    return Argument(
        lambda functions: st.tuples(st.sampled_from(sorted(getattr(functions, table)))),
        lambda values, functions, data: getattr(functions, table)[values[0]],
        lambda functions: bool(getattr(functions, table)),
    )


def _one_value(value: Any, allowed: Callable[[Functions], bool] = lambda f: True) -> Argument:
    """An argument that is always `value`: a spec holds nothing for it."""
    return Argument(lambda functions: st.just(()), lambda *_: value, allowed, width=0)


def _positions(values: tuple[Any, ...], functions: Functions, data: Any) -> list[int]:
    return [p % data.length for p in values[0]] if data.length else []


_bound = st.one_of(st.none(), st.integers(-12, 12))
_step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))

ARGUMENTS: dict[ArgumentKind, Argument] = {
    ArgumentKind.PREDICATE: _named("filters"),
    ArgumentKind.MAP: _named("maps"),
    ArgumentKind.RANDOM_MAP: _named("random_maps"),
    ArgumentKind.KEY_MAP: _one_value(add_key_draw, lambda functions: functions.jax_draws),
    ArgumentKind.INDEX_MAP: _one_value(with_index, lambda functions: functions.with_index),
    ArgumentKind.SEED: Argument(_one(seeds)),
    ArgumentKind.OPTIONAL_SEED: Argument(_one(optional_seeds)),
    ArgumentKind.COUNT: Argument(_one(st.integers(1, 30))),
    ArgumentKind.EPOCHS: Argument(_one(st.integers(1, 3))),
    ArgumentKind.OPTIONAL_EPOCHS: Argument(_one(st.one_of(st.none(), st.integers(1, 3)))),
    ArgumentKind.WINDOW: Argument(_one(st.integers(1, 12))),
    ArgumentKind.BATCH_SIZE: Argument(_one(st.integers(1, 5))),
    ArgumentKind.FLAG: Argument(_one(st.booleans())),
    ArgumentKind.SLICE: Argument(
        lambda functions: st.tuples(_bound, _bound, _step),
        lambda values, functions, data: slice(*values),
        width=3,
    ),
    ArgumentKind.POSITIONS: Argument(
        _one(st.lists(st.integers(0, 5), min_size=1, max_size=6).map(tuple)), _positions
    ),
    ArgumentKind.JAX_RNG: _one_value("jax"),
}
"""How each kind of argument a stage's `random_stage` names is drawn and resolved."""


def declared_stages(level: Level) -> list[tuple[type[Any], RandomStage]]:
    """Every stage class of grainfn at `level` with each `random_stage` it declares itself.

    Raises:
        ValueError: where two classes at one level declare the same name.

    Examples:
        >>> from grainfn._src.stages.limit import LimitedStream
        >>> (LimitedStream, LimitedStream.random_stage) in declared_stages("stream")
        True
    """
    kinds = dataset_kinds() if level == "dataset" else stage_kinds()
    found = [(kind, stage) for kind in kinds for stage in random_stages(kind)]
    named: dict[str, type[Any]] = {}
    for kind, stage in found:
        if named.setdefault(stage.name, kind) is not kind:
            raise ValueError(
                f"{named[stage.name].__qualname__} and {kind.__qualname__} both declare the "
                f"{level} stage {stage.name!r}: give one a RandomStage name of its own."
            )
    return found


def declared_kinds(
    functions: Functions = INTEGERS,
    level: Level = "stream",
    grain_only: bool = False,
    on_device: bool = False,
) -> dict[str, RandomStage]:
    """The stages random pipelines draw at `level`, from their declarations, by name.

    Args:
        functions: The element functions: a stage whose arguments they do not
            allow (an empty table) is left out.
        level: "dataset" for map-level stages, "stream" for stream stages.
        grain_only: Only the stages Grain has as well (`in_grain`).
        on_device: Only the stages with a device form (`fn.to_jax`).

    Examples:
        >>> "take_while" in declared_kinds()
        True
        >>> "take_while" in declared_kinds(grain_only=True)
        False
    """
    return {
        stage.name: stage
        for kind, stage in declared_stages(level)
        if (stage.in_grain or not grain_only)
        and (not on_device or kind.device_program is not Dataset.device_program)
        and all(ARGUMENTS[argument].allowed(functions) for argument in stage.kinds())
    }


def sample_op(
    draw: Draw, kinds: Mapping[str, RandomStage], functions: Functions
) -> tuple[Any, ...]:
    """A spec `(name, *values)` of one of `kinds` (from `declared_kinds`), its values drawn."""
    name = draw(st.sampled_from(sorted(kinds)))
    values = [draw(ARGUMENTS[kind].values(functions)) for kind in kinds[name].kinds()]
    return (name, *(value for drawn in values for value in drawn))


def apply_op(op: tuple[Any, ...], data: Any, functions: Functions = INTEGERS) -> Any:
    """`data` through the stage of a spec from `sample_op`, found by its name at `data`'s level.

    Raises:
        ValueError: for a name no stage at that level declares, naming those that do.
    """
    name, *values = op
    level: Level = "stream" if isinstance(data, Stream) else "dataset"
    stages = {stage.name: stage for _, stage in declared_stages(level)}
    if name not in stages:
        raise ValueError(f"No {level} stage declares {name!r}; those that do: {sorted(stages)}.")
    stage = stages[name]
    arguments = [ARGUMENTS[kind] for kind in stage.kinds()]
    if len(values) != sum(argument.width for argument in arguments):
        widths = ", ".join(f"{k.value}: {a.width}" for k, a in zip(stage.kinds(), arguments))
        raise ValueError(
            f"The spec {op!r} must hold {sum(a.width for a in arguments)} values after its "
            f"name, by the kinds of {name!r}'s arguments ({widths or 'none'})."
        )
    resolved = []
    for argument in arguments:
        resolved.append(argument.resolve(tuple(values[: argument.width]), functions, data))
        values = values[argument.width :]
    positional, keywords = resolved[: len(stage.arguments)], resolved[len(stage.arguments) :]
    named = {keyword: value for (keyword, _), value in zip(stage.keywords, keywords)}
    return getattr(fn, stage.function)(*positional, data, **named)


@st.composite
def unary_op(
    draw: Any, allow_batch: bool = True, functions: Functions = INTEGERS
) -> tuple[Any, ...]:
    """One map-level stage spec, of the stages Grain has too (the differential tests')."""
    kinds = declared_kinds(functions, "dataset", grain_only=True)
    if not allow_batch:
        kinds.pop("batch")
    return sample_op(draw, kinds, functions)


@st.composite
def dataset_specs(
    draw: Any,
    depth: int = 2,
    functions: Functions = INTEGERS,
    sources: st.SearchStrategy[Dataset] | None = None,
) -> tuple[Any, ...]:
    """Specs of random map-level pipelines; some are invalid (e.g. batch after filter).

    Their stages are the declared map-level stages Grain has too (`in_grain`):
    the differential tests build every spec with Grain as well.

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
    return sample_op(draw, declared_kinds(functions, "stream", grain_only), functions)


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
