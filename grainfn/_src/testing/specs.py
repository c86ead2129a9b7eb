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
from grainfn._src.core.stream import Stream


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


def _slice_op(draw: Any) -> tuple[Any, ...]:
    bound = st.one_of(st.none(), st.integers(-12, 12))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return ("slice", draw(bound), draw(bound), draw(step))


@st.composite
def unary_op(
    draw: Any, allow_batch: bool = True, functions: Functions = INTEGERS
) -> tuple[Any, ...]:
    """One map-level stage spec."""
    index_kinds = ["seed", "shuffle", "slice", "take", "repeat"]
    batch = ["batch"] if allow_batch else []
    kind = draw(st.sampled_from(index_kinds + functions.element_kinds() + batch))
    if kind in ("shuffle", "slice", "take", "repeat"):
        return _index_op(draw, kind)
    return _element_op(draw, kind, functions)


def _index_op(draw: Any, kind: str) -> tuple[Any, ...]:
    """A spec of a stage that only moves positions: shuffle, slice, take or repeat."""
    if kind == "shuffle":
        return ("shuffle", draw(optional_seeds))
    if kind == "slice":
        return _slice_op(draw)
    if kind == "take":
        return ("take", tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))))
    return ("repeat", draw(st.one_of(st.none(), st.integers(1, 3))), draw(st.booleans()))


def _element_op(draw: Any, kind: str, functions: Functions = INTEGERS) -> tuple[Any, ...]:
    """A spec of the stages that datasets and streams share."""
    if kind == "seed":
        return ("seed", draw(seeds))
    if kind == "map":
        return ("map", draw(st.sampled_from(sorted(functions.maps))))
    if kind == "random_map":
        names = sorted(functions.random_maps)
        return ("random_map", draw(st.sampled_from(names)), draw(optional_seeds))
    if kind == "map_with_index":
        return ("map_with_index",)
    if kind == "filter":
        return ("filter", draw(st.sampled_from(sorted(functions.filters))))
    return ("batch", draw(st.integers(1, 5)), draw(st.booleans()))


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
        ds = _apply_fn(op, ds, functions)
    return ds


def _apply_fn(op: tuple[Any, ...], ds: Any, functions: Functions = INTEGERS) -> Any:
    kind = op[0]
    if kind == "seed":
        return fn.seed(op[1], ds)
    if kind == "shuffle":
        return fn.shuffle(ds, seed=op[1])
    if kind == "slice":
        return fn.slice(slice(*op[1:]), ds)
    if kind == "take":
        return fn.slice([p % ds.length for p in op[1]] if ds.length else [], ds)
    if kind == "repeat":
        return fn.repeat(op[1], ds, reseed_each_epoch=op[2])
    if kind == "map":
        return fn.map(functions.maps[op[1]], ds)
    if kind == "random_map":
        return fn.random_map(functions.random_maps[op[1]], ds, seed=op[2])
    if kind == "map_with_index":
        return fn.map_with_index(with_index, ds)
    if kind == "filter":
        return fn.filter(functions.filters[op[1]], ds)
    return fn.batch(op[1], ds, drop_remainder=op[2])


# Streams: a dataset spec read in order, then stream-level stages.


@st.composite
def stream_op(draw: Any, functions: Functions = INTEGERS) -> tuple[Any, ...]:
    """One stream-level stage spec."""
    kinds = ["seed", *functions.element_kinds(), "batch", "limit", "repeat"]
    kind = draw(st.sampled_from(kinds))
    if kind == "limit":
        return ("limit", draw(st.integers(1, 30)))
    if kind == "repeat":
        return ("repeat", draw(st.integers(1, 3)))
    return _element_op(draw, kind, functions)


@st.composite
def stream_specs(
    draw: Any,
    depth: int = 1,
    functions: Functions = INTEGERS,
    sources: st.SearchStrategy[Dataset] | None = None,
) -> tuple[Any, ...]:
    """Specs of finite streams.

    `(("stream", dataset_spec, allow_nones), *stream_ops)` or a mix of stream
    specs with optional weights, followed by stream stages.
    """
    if depth > 0 and draw(st.integers(0, 3)) == 0:
        part = stream_specs(depth=depth - 1, functions=functions, sources=sources)
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
    ops = draw(st.lists(stream_op(functions), max_size=5))
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
        if op[0] == "limit":
            stream = fn.limit(op[1], stream)
        elif op[0] == "repeat":
            stream = fn.repeat(op[1], stream)
        else:
            stream = _apply_fn(op, stream, functions)
    return stream
