"""Tests for grainfn._src.testing.device_specs: random pipelines that to_jax supports."""

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from grainfn._src.testing.device_specs import (
    DEVICE_SOURCES,
    build_device_dataset,
    device_dataset_specs,
    device_source,
)
from grainfn._src.testing.specs import components_of


@pytest.mark.parametrize(
    ("kind", "dtype", "shape"),
    [
        ("int32", "int32", ()),
        ("int8", "int8", ()),
        ("uint8", "uint8", ()),
        ("bfloat16", "bfloat16", ()),
        ("list", "int32", (2,)),
        ("tuple", "int32", (2,)),
    ],
)
def test_device_sources_have_the_dtype_and_shape_of_their_kind(
    kind: str, dtype: str, shape: tuple[int, ...]
) -> None:
    ds = device_source(kind, 7)
    assert ds.length == 7
    element = np.asarray(ds.get(3))
    assert (str(element.dtype), element.shape) == (dtype, shape)


def test_range_and_dict_sources() -> None:
    assert device_source("range", 5).get_many(range(5)) == [0, 1, 2, 3, 4]
    row = device_source("dict", 4).get(2)
    assert sorted(row) == ["x", "y"]
    assert (int(row["x"]), float(row["y"])) == (6, 1.0)
    assert np.asarray(device_source("int8", 60).get(0)) == -50  # int8 rows are signed


def test_mix_and_concatenate_heads_are_built_from_their_parts() -> None:
    parts = ((("range", 4),), (("range", 6),))
    concatenated = build_device_dataset((("concatenate", parts),))
    assert concatenated.get_many(range(10)) == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5]
    mixed = build_device_dataset((("mix", parts, (1.0, 1.0)),))
    assert mixed.get_many(range(4)) == [0, 0, 1, 1]


def head_kinds(spec: tuple[Any, ...]) -> set[str]:
    parts = components_of(spec[0])
    return {kind for part in parts for kind in head_kinds(part)} if parts else {spec[0][0]}


@settings(max_examples=15)
@given(device_dataset_specs())
def test_drawn_specs_have_device_heads_shared_by_every_component(spec: tuple[Any, ...]) -> None:
    kinds = head_kinds(spec)
    assert kinds <= set(DEVICE_SOURCES)
    if components_of(spec[0]):
        assert len(kinds) == 1  # components share one head kind: one structure on device
        assert all(op[0] != "batch" for part in components_of(spec[0]) for op in part[1:])


@settings(max_examples=15)
@given(device_dataset_specs(batch=False))
def test_specs_without_batches_have_no_batch_stage(spec: tuple[Any, ...]) -> None:
    assert all(op[0] != "batch" for op in spec[1:])
