"""The Grain API is a thin wrapper: for every pipeline it builds the core value `grainfn.fn` builds.

Random pipeline specs are built twice, with the Grain-API builders of
`tests/support/pipelines.py` given `grainfn` as the Grain module, and with the core
builders. The facade's `.core` must equal the core value (records compare
structurally), so everything proven about the core (including the differential
tests against Grain) holds for the facade. Reading through the facade
(`ds[i]`, iteration, `get_state`/`set_state`) must give the same elements.
The one option the facade sets that the core builders leave out is Grain's
key order on its batches (`fn.batch(..., sort_keys=True)`, see `grain_order`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings

import grainfn
from grainfn import fn
from grainfn._src.core.rebuild import with_parents
from grainfn._src.facade.dataset import IterDataset, MapDataset
from grainfn._src.stages.batch import BatchedDataset, BatchedStream
from grainfn.testing import assert_elements_equal

from support.pipelines import (
    build_dataset,
    build_grain,
    build_grain_stream,
    build_stream,
    dataset_specs,
    stream_specs,
)


def uses_take(spec: Any) -> bool:
    """Whether a spec selects positions, which the Grain API spells as select_from_datasets."""
    if not isinstance(spec, tuple):
        return False
    return any(
        (isinstance(part, tuple) and part[:1] == ("take",)) or uses_take(part) for part in spec
    )


def grain_order(node: Any) -> Any:
    """`node` with each batch that stacks (no batch_fn) set to sort keys, as the facade's are."""
    parents = tuple(grain_order(parent) for parent in node.parents)
    if parents != node.parents:
        node = with_parents(node, parents)
    if isinstance(node, (BatchedDataset, BatchedStream)) and node.batch_fn is None:
        node = dataclasses.replace(node, sort_keys=True)
    return node


def build_both(build_core: Any, build_facade: Any, spec: Any) -> tuple[Any, Any] | None:
    try:
        core = build_core(spec)
    except (ValueError, TypeError, IndexError) as error:
        with pytest.raises(type(error)):
            build_facade(spec, grainfn)
        return None
    return grain_order(core), build_facade(spec, grainfn)


@settings(max_examples=150)
@given(dataset_specs())
def test_map_datasets_wrap_the_core_value(spec: tuple[Any, ...]) -> None:
    note(f"spec = {spec!r}")
    built = build_both(build_dataset, build_grain, spec)
    if built is None:
        return
    core, facade = built
    assert isinstance(facade, MapDataset)
    if not uses_take(spec):
        assert facade.core == core
    assert len(facade) == core.length
    positions = list(range(min(core.length, 30)))
    if core.length < 2**40 and not uses_take(spec):  # a later epoch of a selection differs
        positions += [core.length + 3]
    for position in positions if core.length else []:
        try:
            expected = core.get(position)
        except (ValueError, OverflowError) as error:
            with pytest.raises(type(error)):
                facade[position]
            continue
        assert_elements_equal(facade[position], expected, f"position {position}")


@settings(max_examples=100)
@given(stream_specs(grain_only=True))
def test_iter_datasets_wrap_the_core_stream(spec: tuple[Any, ...]) -> None:
    note(f"spec = {spec!r}")
    built = build_both(build_stream, build_grain_stream, spec)
    if built is None:
        return
    core, facade = built
    assert isinstance(facade, IterDataset)
    if not uses_take(spec):
        assert facade.core == core
    try:
        expected = list(itertools.islice(fn.iterate(core), 60))
    except (ValueError, TypeError):
        with pytest.raises((ValueError, TypeError)):
            list(itertools.islice(facade, 60))
        return
    it = iter(facade)
    got = []
    for k, _ in enumerate(expected):
        if k % 7 == 3:
            saved = json.loads(json.dumps(it.get_state()))
            resumed = iter(build_grain_stream(spec, grainfn))
            resumed.set_state(saved)
            rest = expected[k : k + 5]
            for element, wanted in zip(itertools.islice(resumed, len(rest)), rest):
                assert_elements_equal(element, wanted, f"resumed at {k}")
        got.append(next(it))
    for k, (ours, theirs) in enumerate(zip(got, expected)):
        assert_elements_equal(ours, theirs, f"element {k}")


def test_reading_through_the_facade_equals_the_core() -> None:
    ds = grainfn.MapDataset.range(50).seed(3).shuffle().random_map(lambda x, rng: x + rng.random())
    core = fn.random_map(ds.core.fn, fn.shuffle(fn.seed(3, fn.range(50))), seed=ds.core.seed)
    assert ds.core == core
    assert list(ds) == list(fn.elements(core)) == [ds[i] for i in range(50)]
    stream = ds.to_iter_dataset().batch(8)
    batched = fn.batch(8, fn.from_dataset(core), sort_keys=True)
    for ours, theirs in zip(stream, fn.iterate(batched)):
        np.testing.assert_array_equal(ours, theirs)
