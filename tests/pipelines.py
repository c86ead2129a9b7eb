"""Random map-level pipelines, built both in grainfn.fn and in Grain.

A pipeline spec is a plain tuple, so hypothesis can generate, shrink and print
it: `(("range", 10), ("seed", 3), ("shuffle", None), ("batch", 4, False))`.
`build_fn` and `build_grain` turn one spec into the two libraries' datasets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from grainfn import fn


def add_one(x: Any) -> Any:
    return x + 1


def square_mod(x: Any) -> Any:
    return (x * x) % 1009


def with_index(i: int, x: Any) -> Any:
    return x * 3 + i


def add_draw(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 1000)


def add_uniform(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.random()


def keep_mostly(x: Any) -> bool:
    return bool(int(np.sum(x)) % 3 != 0)


def keep_even(x: Any) -> bool:
    return bool(int(np.sum(x)) % 2 == 0)


MAPS = {"add_one": add_one, "square_mod": square_mod}
RANDOM_MAPS = {"add_draw": add_draw, "add_uniform": add_uniform}
FILTERS = {"keep_mostly": keep_mostly, "keep_even": keep_even}

seeds = st.integers(0, 2**32 - 1)
optional_seeds = st.one_of(st.none(), seeds)


def _slice_op(draw: Any) -> tuple[Any, ...]:
    bound = st.one_of(st.none(), st.integers(-12, 12))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return ("slice", draw(bound), draw(bound), draw(step))


@st.composite
def unary_op(draw: Any, allow_batch: bool = True) -> tuple[Any, ...]:
    kind = draw(
        st.sampled_from(
            [
                "seed",
                "shuffle",
                "slice",
                "take",
                "repeat",
                "map",
                "random_map",
                "map_with_index",
                "filter",
            ]
            + (["batch"] if allow_batch else [])
        )
    )
    if kind == "seed":
        return ("seed", draw(seeds))
    if kind == "shuffle":
        return ("shuffle", draw(optional_seeds))
    if kind == "slice":
        return _slice_op(draw)
    if kind == "take":
        return ("take", tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))))
    if kind == "repeat":
        return ("repeat", draw(st.one_of(st.none(), st.integers(1, 3))), draw(st.booleans()))
    if kind == "map":
        return ("map", draw(st.sampled_from(sorted(MAPS))))
    if kind == "random_map":
        return ("random_map", draw(st.sampled_from(sorted(RANDOM_MAPS))), draw(optional_seeds))
    if kind == "map_with_index":
        return ("map_with_index",)
    if kind == "filter":
        return ("filter", draw(st.sampled_from(sorted(FILTERS))))
    return ("batch", draw(st.integers(1, 5)), draw(st.booleans()))


@st.composite
def pipeline_specs(draw: Any, depth: int = 2) -> tuple[Any, ...]:
    """Specs of random valid-or-not map-level pipelines (invalid ones must fail in both)."""
    if depth > 0 and draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(["mix", "concatenate"]))
        parts = tuple(draw(st.lists(pipeline_specs(depth=depth - 1), min_size=1, max_size=3)))
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
    else:
        head = ("range", draw(st.integers(1, 40)))
    ops = draw(st.lists(unary_op(), max_size=5))
    if draw(st.booleans()):
        ops.insert(0, ("seed", draw(seeds)))
    return (head, *ops)


def build_fn(spec: tuple[Any, ...]) -> fn.Dataset:
    head, *ops = spec
    if head[0] == "range":
        ds = fn.range(head[1])
    elif head[0] == "mix":
        ds = fn.mix([build_fn(p) for p in head[1]], head[2])
    else:
        ds = fn.concatenate([build_fn(p) for p in head[1]])
    for op in ops:
        ds = _apply_fn(op, ds)
    return ds


def _apply_fn(op: tuple[Any, ...], ds: fn.Dataset) -> fn.Dataset:
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
        return fn.map(MAPS[op[1]], ds)
    if kind == "random_map":
        return fn.random_map(RANDOM_MAPS[op[1]], ds, seed=op[2])
    if kind == "map_with_index":
        return fn.map_with_index(with_index, ds)
    if kind == "filter":
        return fn.filter(FILTERS[op[1]], ds)
    return fn.batch(op[1], ds, drop_remainder=op[2])


def build_grain(spec: tuple[Any, ...]) -> Any:
    import grain

    head, *ops = spec
    if head[0] == "range":
        ds = grain.MapDataset.range(head[1])
    elif head[0] == "mix":
        ds = grain.MapDataset.mix([build_grain(p) for p in head[1]], head[2])
    else:
        ds = grain.MapDataset.concatenate([build_grain(p) for p in head[1]])
    for op in ops:
        ds = _apply_grain(op, ds)
    return ds


def _apply_grain(op: tuple[Any, ...], ds: Any) -> Any:
    kind = op[0]
    if kind == "seed":
        return ds.seed(op[1])
    if kind == "shuffle":
        return ds.shuffle(seed=op[1])
    if kind == "slice":
        return ds.slice(slice(*op[1:]))
    if kind == "take":
        from grain._src.python.dataset.transformations.slice import SliceMapDataset  # noqa: F401

        return _grain_take(ds, [p % len(ds) for p in op[1]] if len(ds) else [])
    if kind == "repeat":
        return ds.repeat(op[1], reseed_each_epoch=op[2])
    if kind == "map":
        return ds.map(MAPS[op[1]])
    if kind == "random_map":
        return ds.random_map(RANDOM_MAPS[op[1]], seed=op[2])
    if kind == "map_with_index":
        return ds.map_with_index(with_index)
    if kind == "filter":
        return ds.filter(FILTERS[op[1]])
    return ds.batch(op[1], drop_remainder=op[2])


def _grain_take(ds: Any, positions: list[int]) -> Any:
    """Grain has no positional selection; `select_from_datasets` with a table is its equivalent."""
    import grain

    class Table:
        def __len__(self) -> int:
            return len(positions)

        def __getitem__(self, index: int) -> tuple[int, int]:
            epoch, offset = divmod(index, len(positions))
            return 0, positions[offset] + epoch * len(ds)

    return grain.MapDataset.select_from_datasets([ds], Table())
