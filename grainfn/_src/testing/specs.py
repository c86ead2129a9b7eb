"""Random pipelines for property tests: specs that hypothesis can generate, shrink and print.

A spec is a plain tuple, e.g. `(("range", 10), ("seed", 3), ("shuffle", None),
("batch", 4, False))`: a head (a leaf such as `range`, or a stage that
combines sub-specs, such as `("mix", parts, weights)`) then stages. The
stages and the combining heads are those that declare `random_stage` in their
own modules (`grainfn._src.core.random_stage`), found by `declared_kinds` and
`declared_heads`; each spec holds the values of its arguments, drawn by their
kinds (`ARGUMENTS`; a head's components, weights and selection map by
`sample_head`). A stage that declares it `leads` (`seed`) is also put first
in a pipeline, half the time (`sample_leads`). `build_dataset` and
`build_stream` turn a spec into grainfn values (`call_arguments` resolves a
spec's values into its function's arguments); the stage functions are
module-level, so built pipelines pickle.
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
        resolve: `(values, functions, length) -> argument` of the stage's function,
            `length` the data's (None for a stream, or a head).
        allowed: Whether `functions` allow it (an empty table of them does not).
        width: How many values a spec holds for it.
    """

    values: Callable[[Functions], st.SearchStrategy[tuple[Any, ...]]]
    resolve: Callable[[tuple[Any, ...], Functions, int | None], Any] = (
        lambda values, functions, length: values[0]
    )
    allowed: Callable[[Functions], bool] = lambda functions: True
    width: int = 1


def _one(strategy: st.SearchStrategy[Any]) -> Callable[[Functions], st.SearchStrategy[Any]]:
    """Draws one value of `strategy`, whatever the functions."""
    return lambda functions: st.tuples(strategy)


def _named(table: str) -> Argument:
    """The name of one of `functions`' `table` (maps, random_maps, filters); its function."""
    return Argument(
        lambda functions: st.tuples(st.sampled_from(sorted(getattr(functions, table)))),
        lambda values, functions, length: getattr(functions, table)[values[0]],
        lambda functions: bool(getattr(functions, table)),
    )


def _one_value(value: Any, allowed: Callable[[Functions], bool] = lambda f: True) -> Argument:
    """An argument that is always `value`: a spec holds nothing for it."""
    return Argument(lambda functions: st.just(()), lambda *_: value, allowed, width=0)


def _positions(values: tuple[Any, ...], functions: Functions, length: int | None) -> list[int]:
    """The positions held, taken modulo the data's length (none of empty data)."""
    return [p % length for p in values[0]] if length else []


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
    ArgumentKind.DROP_REMAINDER: Argument(_one(st.booleans())),
    ArgumentKind.SLICE: Argument(
        lambda functions: st.tuples(_bound, _bound, _step),
        lambda values, functions, length: slice(*values),
        width=3,
    ),
    ArgumentKind.POSITIONS: Argument(
        _one(st.lists(st.integers(0, 5), min_size=1, max_size=6).map(tuple)), _positions
    ),
    ArgumentKind.JAX_RNG: _one_value("jax"),
}
"""How each kind of argument a stage's `random_stage` names is drawn and resolved."""

COMPONENT_KINDS = frozenset(
    {ArgumentKind.COMPONENTS, ArgumentKind.OPTIONAL_WEIGHTS, ArgumentKind.SELECTION_MAP}
)
"""The kinds of a head's arguments drawn from its components (`sample_head`), not `ARGUMENTS`."""


def _weights(count: int) -> st.SearchStrategy[tuple[float, ...] | None]:
    """None, or one weight in [0.1, 5] for each of `count` components."""
    return st.one_of(
        st.none(), st.lists(st.floats(0.1, 5.0), min_size=count, max_size=count).map(tuple)
    )


def _selection_map(count: int) -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    """1 to 6 pairs (one of `count` components, a position 0 to 5 in it)."""
    pair = st.tuples(st.integers(0, count - 1), st.integers(0, 5))
    return st.lists(pair, min_size=1, max_size=6).map(tuple)


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
    undrawn: bool = False,
) -> dict[str, RandomStage]:
    """The stages random pipelines draw at `level`, from their declarations, by name.

    Heads, which combine pipelines, are `declared_heads`.

    Args:
        functions: The element functions: a stage whose arguments they do not
            allow (an empty table) is left out.
        level: "dataset" for map-level stages, "stream" for stream stages.
        grain_only: Only the stages Grain has as well (`in_grain`).
        on_device: Only the stages with a device form (`fn.to_jax`).
        undrawn: With the stages random pipelines leave out (not `drawn`) too.

    Examples:
        >>> "take_while" in declared_kinds()
        True
        >>> "take_while" in declared_kinds(grain_only=True)
        False
    """
    return _drawn(functions, level, grain_only, on_device, undrawn, heads=False)


def declared_heads(
    functions: Functions = INTEGERS,
    level: Level = "dataset",
    grain_only: bool = False,
    on_device: bool = False,
    undrawn: bool = False,
) -> dict[str, RandomStage]:
    """The stages random pipelines draw at `level` as a spec's head, combining sub-specs.

    They are the declarations with a `COMPONENTS` argument (`RandomStage.combines`);
    the arguments are those of `declared_kinds`.

    Examples:
        >>> sorted(declared_heads(level="dataset")), sorted(declared_heads(level="stream"))
        (['concatenate', 'mix'], ['mix'])
        >>> sorted(declared_heads(level="dataset", undrawn=True))
        ['concatenate', 'mix', 'select_from_datasets', 'zip']
    """
    return _drawn(functions, level, grain_only, on_device, undrawn, heads=True)


def _drawn(
    functions: Functions,
    level: Level,
    grain_only: bool,
    on_device: bool,
    undrawn: bool,
    heads: bool,
) -> dict[str, RandomStage]:
    """The declarations at `level` that these functions and filters let in: heads, or not."""
    return {
        stage.name: stage
        for kind, stage in declared_stages(level)
        if stage.combines == heads
        and (stage.drawn or undrawn)
        and (stage.in_grain or not grain_only)
        and (not on_device or kind.device_program is not Dataset.device_program)
        and all(
            ARGUMENTS[argument].allowed(functions)
            for argument in stage.kinds()
            if argument not in COMPONENT_KINDS
        )
    }


def declared_stage(level: Level, name: str, heads: bool = False) -> RandomStage:
    """The stage (or, with `heads`, the head) that declares `name` at `level`.

    Raises:
        ValueError: for a name no such declaration has, naming those that do.
    """
    stages = {stage.name: stage for _, stage in declared_stages(level) if stage.combines == heads}
    if name not in stages:
        what = "head" if heads else "stage"
        raise ValueError(f"No {level} {what} declares {name!r}; those that do: {sorted(stages)}.")
    return stages[name]


def sample_op(
    draw: Draw, kinds: Mapping[str, RandomStage], functions: Functions
) -> tuple[Any, ...]:
    """A spec `(name, *values)` of one of `kinds` (from `declared_kinds`), its values drawn."""
    name = draw(st.sampled_from(sorted(kinds)))
    return _sample_values(draw, kinds[name], functions)


def _sample_values(draw: Draw, stage: RandomStage, functions: Functions) -> tuple[Any, ...]:
    """A spec `(name, *values)` of `stage`, its values drawn."""
    values = [draw(ARGUMENTS[kind].values(functions)) for kind in stage.kinds()]
    return (stage.name, *(value for drawn in values for value in drawn))


def sample_leads(
    draw: Draw, kinds: Mapping[str, RandomStage], functions: Functions
) -> list[tuple[Any, ...]]:
    """The specs that lead a pipeline: of each of `kinds` that `leads`, half the time.

    The strategies put them before the stages they draw (a pipeline's `seed`).
    """
    leads = [kinds[name] for name in sorted(kinds) if kinds[name].leads]
    return [_sample_values(draw, stage, functions) for stage in leads if draw(st.booleans())]


def sample_head(
    draw: Draw,
    heads: Mapping[str, RandomStage],
    components: st.SearchStrategy[tuple[Any, ...]],
    functions: Functions = INTEGERS,
) -> tuple[Any, ...]:
    """A head spec `(name, *values)` of one of `heads` (from `declared_heads`), its values drawn.

    Its `COMPONENTS` are 1 to 3 specs drawn from `components`, its
    `OPTIONAL_WEIGHTS` None or one weight per component, its `SELECTION_MAP`
    pairs of a component and a position, and any other argument is drawn as a
    stage's is.
    """
    name = draw(st.sampled_from(sorted(heads)))
    values: list[Any] = []
    parts: tuple[Any, ...] = ()
    for kind in heads[name].kinds():
        if kind is ArgumentKind.COMPONENTS:
            parts = tuple(draw(st.lists(components, min_size=1, max_size=3)))
            values.append(parts)
        elif kind is ArgumentKind.OPTIONAL_WEIGHTS:
            values.append(draw(_weights(len(parts))))
        elif kind is ArgumentKind.SELECTION_MAP:
            values.append(draw(_selection_map(len(parts))))
        else:
            values.extend(draw(ARGUMENTS[kind].values(functions)))
    return (name, *values)


def _width(kind: ArgumentKind) -> int:
    """How many values a spec holds for an argument of `kind`."""
    return 1 if kind in COMPONENT_KINDS else ARGUMENTS[kind].width


def _held(stage: RandomStage, spec: tuple[Any, ...]) -> list[tuple[ArgumentKind, tuple[Any, ...]]]:
    """Each of `stage`'s argument kinds with the values `spec` holds for it, in order.

    Raises:
        ValueError: where `spec` holds another number of values than the kinds take.
    """
    name, *values = spec
    widths = [_width(kind) for kind in stage.kinds()]
    if len(values) != sum(widths):
        each = ", ".join(f"{kind.value}: {width}" for kind, width in zip(stage.kinds(), widths))
        raise ValueError(
            f"The spec {spec!r} must hold {sum(widths)} values after its name, by the "
            f"kinds of {name!r}'s arguments ({each or 'none'})."
        )
    held = []
    for kind, width in zip(stage.kinds(), widths):
        held.append((kind, tuple(values[:width])))
        values = values[width:]
    return held


def call_arguments(
    stage: RandomStage,
    spec: tuple[Any, ...],
    functions: Functions = INTEGERS,
    length: int | None = None,
    build: Callable[[tuple[Any, ...]], Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of `stage`'s function that `spec`'s values resolve to: positional, keywords.

    Its data, if any, goes after the positional ones; Grain's API takes the
    same (`RandomStage`'s Grain twin).

    Args:
        stage: The declaration of the spec's stage or head.
        spec: `(name, *values)`, from `sample_op` or `sample_head`.
        functions: The element functions that the values name.
        length: The length of the stage's data (None for a stream, or a head).
        build: For a head, what builds each of its components' specs.

    Examples:
        >>> shuffle = declared_stage("dataset", "shuffle")
        >>> call_arguments(shuffle, ("shuffle", 7))
        ([], {'seed': 7})
        >>> call_arguments(declared_stage("dataset", "take"), ("take", (1, 5)), length=4)
        ([[1, 1]], {})
    """
    resolved = []
    for kind, values in _held(stage, spec):
        if kind is ArgumentKind.COMPONENTS:
            if build is None:
                raise ValueError(f"{stage.name!r} is a head: give a build of its components.")
            resolved.append([build(part) for part in values[0]])
        elif kind in COMPONENT_KINDS:
            resolved.append(values[0])
        else:
            resolved.append(ARGUMENTS[kind].resolve(values, functions, length))
    positional, keywords = resolved[: len(stage.arguments)], resolved[len(stage.arguments) :]
    return positional, {keyword: value for (keyword, _), value in zip(stage.keywords, keywords)}


def apply_op(
    op: tuple[Any, ...], data: Any, functions: Functions = INTEGERS, level: Level | None = None
) -> Any:
    """`data` through the stage of a spec from `sample_op`, found by its name at `data`'s level.

    `level` names the level instead: a stream stage's spec applied to a
    Dataset calls its function on the Dataset itself.

    Raises:
        ValueError: for a name no stage at that level declares, naming those that do.
    """
    level = level or ("stream" if isinstance(data, Stream) else "dataset")
    stage = declared_stage(level, op[0])
    length = data.length if isinstance(data, Dataset) else None
    positional, keywords = call_arguments(stage, op, functions, length)
    return getattr(fn, stage.function)(*positional, data, **keywords)


def build_head(
    head: tuple[Any, ...],
    build: Callable[[tuple[Any, ...]], Any],
    level: Level,
    functions: Functions = INTEGERS,
) -> Any:
    """The pipeline of a head spec from `sample_head`, each component built by `build`.

    Raises:
        ValueError: for a name no head at `level` declares, naming those that do.
    """
    stage = declared_stage(level, head[0], heads=True)
    positional, keywords = call_arguments(stage, head, functions, build=build)
    return getattr(fn, stage.function)(*positional, **keywords)


def components_of(head: tuple[Any, ...], level: Level = "dataset") -> tuple[Any, ...]:
    """The specs a head spec combines (its `COMPONENTS`); none for a leaf such as `range`.

    Examples:
        >>> components_of(("mix", ((("range", 2),), (("range", 3),)), None))
        ((('range', 2),), (('range', 3),))
        >>> components_of(("range", 2))
        ()
    """
    heads = {stage.name: stage for _, stage in declared_stages(level) if stage.combines}
    if head[0] not in heads:
        return ()
    held = dict(_held(heads[head[0]], head))
    return tuple(held[ArgumentKind.COMPONENTS][0])


@st.composite
def unary_op(
    draw: Any, allow_batch: bool = True, functions: Functions = INTEGERS
) -> tuple[Any, ...]:
    """One map-level stage spec, of the stages Grain has too (the differential tests')."""
    kinds = declared_kinds(functions, "dataset", grain_only=True)
    if not allow_batch:
        kinds = unstacked(kinds)
    return sample_op(draw, kinds, functions)


def unstacked(kinds: Mapping[str, RandomStage]) -> dict[str, RandomStage]:
    """`kinds` without the stages that stack elements into batches (`RandomStage.stacks`)."""
    return {name: stage for name, stage in kinds.items() if not stage.stacks}


def dropping_remainders(stage: RandomStage, spec: tuple[Any, ...]) -> tuple[Any, ...]:
    """`spec` of `stage` with each `DROP_REMAINDER` value True: every batch full, one shape.

    Examples:
        >>> dropping_remainders(declared_stage("dataset", "batch"), ("batch", 3, False))
        ('batch', 3, True)
    """
    values = [
        (True,) * len(held) if kind is ArgumentKind.DROP_REMAINDER else held
        for kind, held in _held(stage, spec)
    ]
    return (spec[0], *(value for held in values for value in held))


@st.composite
def dataset_specs(
    draw: Any,
    depth: int = 2,
    functions: Functions = INTEGERS,
    sources: st.SearchStrategy[Dataset] | None = None,
) -> tuple[Any, ...]:
    """Specs of random map-level pipelines; some are invalid (e.g. batch after filter).

    Their stages and heads are the declared map-level ones Grain has too
    (`in_grain`): the differential tests build every spec with Grain as well.

    A head combines 1 to 3 sub-specs (`declared_heads`: mix, concatenate) one
    time in five while `depth` allows; each leaf is `fn.range` of 1 to 40
    integers, or a dataset drawn from `sources`, held in the spec as
    `("source", dataset)`.
    """
    heads = declared_heads(functions, "dataset", grain_only=True)
    if depth > 0 and heads and draw(st.integers(0, 4)) == 0:
        part = dataset_specs(depth=depth - 1, functions=functions, sources=sources)
        head: tuple[Any, ...] = sample_head(draw, heads, part, functions)
    elif sources is not None:
        head = ("source", draw(sources))
    else:
        head = ("range", draw(st.integers(1, 40)))
    ops = draw(st.lists(unary_op(functions=functions), max_size=5))
    leads = sample_leads(draw, declared_kinds(functions, "dataset", grain_only=True), functions)
    return (head, *leads, *ops)


def build_dataset(spec: tuple[Any, ...], functions: Functions = INTEGERS) -> Dataset:
    """The grainfn dataset of a spec from `dataset_specs`, its functions from `functions`."""
    head, *ops = spec
    if head[0] == "range":
        ds = fn.range(head[1])
    elif head[0] == "source":
        ds = head[1]
    else:
        ds = build_head(head, lambda part: build_dataset(part, functions), "dataset", functions)
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

    `(("stream", dataset_spec, allow_nones), *stream_ops)`, or a head that
    combines stream specs (`declared_heads` at the stream level: a mix with
    optional weights), followed by stream stages.
    """
    heads = declared_heads(functions, "stream", grain_only)
    if depth > 0 and heads and draw(st.integers(0, 3)) == 0:
        part = stream_specs(depth - 1, functions, sources, grain_only)
        head: tuple[Any, ...] = sample_head(draw, heads, part, functions)
    else:
        base_specs = dataset_specs(depth=1, functions=functions, sources=sources)
        base = draw(base_specs.filter(lambda s: not _infinite(s)))
        head = ("stream", base, draw(st.booleans()))
    ops = draw(st.lists(stream_op(functions, grain_only), max_size=5))
    leads = sample_leads(draw, declared_kinds(functions, "stream", grain_only), functions)
    return (head, *leads, *ops)


def _infinite(spec: tuple[Any, ...]) -> bool:
    """Whether a dataset spec may be endless: a repeat without epochs, or an endless component."""
    head, *ops = spec
    return (
        any(_endless(op) for op in ops)
        or any(_infinite(part) for part in components_of(head))
        or (head[0] == "source" and head[1].length >= INFINITE)
    )


def _endless(op: tuple[Any, ...]) -> bool:
    """Whether a map-level stage's spec holds no number of epochs (`OPTIONAL_EPOCHS` None)."""
    held = _held(declared_stage("dataset", op[0], heads=False), op)
    return any(kind is ArgumentKind.OPTIONAL_EPOCHS and values == (None,) for kind, values in held)


def build_stream(spec: tuple[Any, ...], functions: Functions = INTEGERS) -> Stream:
    """The grainfn stream of a spec from `stream_specs`, its functions from `functions`."""
    head, *ops = spec
    if head[0] == "stream":
        stream = fn.from_dataset(build_dataset(head[1], functions), allow_nones=head[2])
    else:
        stream = build_head(head, lambda part: build_stream(part, functions), "stream", functions)
    for op in ops:
        stream = apply_op(op, stream, functions)
    return stream
