"""Specs of random map-level pipelines that `fn.to_jax` runs, for hypothesis.

Like `grainfn._src.testing.specs`, a spec is a tuple of plain values that
hypothesis shrinks and prints; `build_device_dataset` turns one into a
dataset. The leaves cover the device's sources (range, rows of int32, int8,
uint8 and bfloat16, dicts of rows, lists and tuples of items), and the heads
and stages every declared one (`random_stage`) with a device form, endless
repeats and shared-draw random_maps included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.dataset import Dataset
from grainfn._src.testing.specs import (
    MAPS,
    Functions,
    apply_op,
    build_head,
    declared_heads,
    declared_kinds,
    dropping_remainders,
    sample_head,
    sample_leads,
    sample_op,
    unstacked,
)

DEVICE_SOURCES = ("range", "int32", "int8", "uint8", "bfloat16", "dict", "list", "tuple")
"""The leaves of device specs: `range`; a source of rows of a dtype; a dict of two row
arrays; a list or tuple of items (arrays of shape (2,), stacked on device)."""

PLAIN_LEAVES = ("range", "int32")
"""Leaves whose elements are integers the element functions (map, map_with_index,
random_map) take, with the same results on host and device."""


@st.composite
def device_dataset_specs(
    draw: Any, depth: int = 2, batch: bool = True, head_kind: str | None = None
) -> tuple[Any, ...]:
    """Specs of random map-level pipelines that `fn.to_jax` supports (some may be empty).

    Leaves are drawn from `DEVICE_SOURCES`; heads that combine sub-specs one
    time in five while `depth` allows, from the declared heads with a device
    form (`declared_heads`: mix, concatenate). Components of a head share one
    leaf kind and are not batched: on device they give elements of one
    structure, shape and dtype. Repeats may be endless, so heads of endless
    components appear too (a concatenation of them does not build).
    """
    heads = declared_heads(DEVICE, "dataset", on_device=True)
    combined = depth > 0 and bool(heads) and draw(st.integers(0, 4)) == 0
    leaf_kind = head_kind or draw(st.sampled_from(DEVICE_SOURCES))
    if combined:
        part = device_dataset_specs(depth=depth - 1, batch=False, head_kind=leaf_kind)
        head: tuple[Any, ...] = sample_head(draw, heads, part, DEVICE)
    else:
        head = (leaf_kind, draw(st.integers(1, 40)))
    # Inside a head no map_with_index: its index is the position dtype (int32 or int64),
    # which would promote an int32 source's rows in one component only.
    op = device_op(batch, elements=leaf_kind in PLAIN_LEAVES, with_index=head_kind is None)
    ops = draw(st.lists(op, max_size=5))
    leads = sample_leads(draw, declared_kinds(DEVICE, "dataset", on_device=True), DEVICE)
    return (head, *leads, *ops)


DEVICE = Functions(MAPS, {}, {}, with_index=True, jax_draws=True)
"""The element functions of device pipelines: maps, `map_with_index` and jax-keyed draws,
on integers, with the same results on host and device."""


@st.composite
def device_op(
    draw: Any, batch: bool = True, elements: bool = True, with_index: bool = True
) -> tuple[Any, ...]:
    """One map-level stage spec that runs on device: of a stage with a device form.

    No batch unless `batch`; no element function (map, random_map with jax
    keys) unless `elements`, and no map_with_index unless also `with_index`.
    """
    functions = Functions(
        MAPS if elements else {}, {}, {}, with_index=elements and with_index, jax_draws=elements
    )
    kinds = declared_kinds(functions, "dataset", on_device=True)
    if not batch:
        kinds = unstacked(kinds)
    op = sample_op(draw, kinds, functions)
    return dropping_remainders(kinds[op[0]], op)


def device_source(kind: str, length: int) -> Dataset:
    """The head dataset of kind `kind` (one of `DEVICE_SOURCES`) with `length` elements."""
    rows = np.arange(length)
    if kind == "range":
        return fn.range(length)
    if kind == "int32":  # the same dtype on device in both integer modes
        return fn.source((rows * 3).astype(np.int32))
    if kind in ("int8", "uint8"):
        return fn.source((rows % 100 - (50 if kind == "int8" else 0)).astype(kind))
    if kind == "bfloat16":
        import ml_dtypes

        return fn.source((rows * 0.5).astype(ml_dtypes.bfloat16))  # exact in bfloat16
    if kind == "dict":
        return fn.source({"x": (rows * 3).astype(np.int32), "y": (rows / 2).astype(np.float32)})
    items = [np.array([i, -i], dtype=np.int32) for i in range(length)]
    return fn.source(items if kind == "list" else tuple(items))


def build_device_dataset(spec: tuple[Any, ...]) -> Dataset:
    """The grainfn dataset of a spec from `device_dataset_specs`."""
    head, *ops = spec
    ds: Dataset[Any]
    if head[0] in DEVICE_SOURCES:
        ds = device_source(head[0], head[1])
    else:
        ds = build_head(head, build_device_dataset, "dataset", DEVICE)
    for op in ops:
        ds = apply_op(op, ds, DEVICE)
    return ds
