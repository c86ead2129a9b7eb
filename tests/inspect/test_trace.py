"""trace: the index each stage reads for an element, checked against what `get` returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.stages.batch import BatchedDataset
from grainfn._src.testing.specs import (
    Functions,
    apply_op,
    declared_kinds,
    declared_stages,
    sample_op,
)

from support.registry import names, undeclared


def identity(x: Any) -> Any:
    return x


def keep_all(x: Any) -> bool:
    return True


def ignore_rng(x: Any, rng: np.random.Generator) -> Any:
    rng.integers(10)
    return x


def ignore_index(i: int, x: Any) -> Any:
    return x


def copies(fan_out: int) -> Any:
    def split(x: Any) -> list[Any]:
        return [x] * fan_out

    return split


def tagged_source(tag: int, n: int) -> Dataset[int]:
    """A source whose element at index k of epoch 0 is `tag * 1000 + k`."""
    return fn.source([tag * 1000 + k for k in range(n)])


KEEPS_ELEMENTS = Functions(
    maps={"identity": identity},
    random_maps={"ignore_rng": ignore_rng},
    filters={"keep_all": keep_all},
    with_index=False,
)
"""Element functions that keep the source element, so that the traced source
element can be compared with the element read."""

DRAWN = declared_kinds(KEEPS_ELEMENTS, "dataset")
"""The declared map-level stages, drawn from their `random_stage`."""

NOT_DRAWN: dict[str, str] = {
    "random_map_jax": "its function adds jax draws to the element (no function here keeps it)",
}
"""The declared stages `KEEPS_ELEMENTS` leaves out, and why."""

UNDRAWN: dict[str, tuple[str, Callable[[Any, Dataset[Any]], Dataset[Any]], str]] = {
    # name: (its stage kind's class name, the stage over a dataset with its arguments drawn,
    # why it is built here)
    "map_with_index": (
        "IndexMappedDataset",
        lambda draw, ds: fn.map_with_index(ignore_index, ds),
        "its declared function (with_index) changes the element",
    ),
    "flat_map": (
        "FlatMappedDataset",
        lambda draw, ds: fan_out(draw(st.integers(1, 3)), ds),
        "it declares no random_stage",
    ),
}
"""The map-level stages built here rather than drawn from a declaration, and why."""

HEADS: dict[str, str] = {
    "SourceDataset": "_head's sources (tagged_source)",
    "MixedDataset": "_head",
    "ConcatenatedDataset": "_head",
    "SelectedDataset": "_head",
    "RangeDataset": "test_trace_rows_through_shuffle_slice_repeat",
    "TimedDataset": "test_timed_stages_add_no_rows",
}
"""The stage kinds that `_head` or a test here builds, without a declaration or declared
as heads (mix, concatenate, select_from_datasets: `RandomStage.combines`, which `_head`
builds over tagged sources): which."""

UNTRACED: dict[str, str] = {
    "ZippedDataset": "trace refuses it (test_a_stage_that_cannot_say_is_named)",
    "ObjectDataset": "a user's object stage: its index rows are the object's own",
    "InNamedThreads": "an executor of reads (ReadOptions), not a stage of fn",
    "SampledDataset": "the DataLoader's sampler stage, not a stage of fn",
    "HostRows": "the elastic iterator's rows of a host, not a stage of fn",
    "CompiledStage": "a compiled device stage, read on device, not a stage of fn",
}
"""The stage kinds without a declaration that trace's random pipelines leave out, and why."""


def fan_out(fan: int, ds: Dataset[Any]) -> Dataset[Any]:
    return fn.flat_map(copies(fan), ds, max_fan_out=fan)


def test_every_map_level_stage_is_drawn_built_or_left_out_by_name() -> None:
    declared = {stage.name for _, stage in declared_stages("dataset") if not stage.combines}
    left_out = set(NOT_DRAWN) | (set(UNDRAWN) & declared)
    assert declared - set(DRAWN) == left_out, "declared, so drawn unless in NOT_DRAWN or UNDRAWN"
    heads = {kind for kind, stage in declared_stages("dataset") if stage.combines}
    kinds = set(names(undeclared("dataset") | heads))
    built = {kind for kind, _, _ in UNDRAWN.values()} & kinds
    named = built | set(HEADS) | set(UNTRACED)
    missing = sorted(kinds - named)
    assert not missing, f"{missing}: declare random_stage, or add to UNDRAWN, HEADS or UNTRACED"
    assert named <= kinds, sorted(named - kinds)
    assert all(reason for _, _, reason in UNDRAWN.values()) and all(UNTRACED.values())


def contains_batch(ds: Dataset[Any]) -> bool:
    """Whether a stage of `ds` is a batch (which reads several parent indices)."""
    return isinstance(ds, BatchedDataset) or any(contains_batch(p) for p in ds.parents)


@st.composite
def pipelines(draw: Any, depth: int = 2) -> tuple[Dataset[Any], bool]:
    """Random index pipelines whose element maps keep the source element; and whether batched.

    Each stage is a declared one (`DRAWN`) or one of `UNDRAWN`; a draw its
    stage refuses to build (a batch after a filter, a repeat of an endless
    dataset, a seed left to an unseeded pipeline) is left out.

    Returns the dataset and whether it has a batch stage (a batch reads several
    parent indices, where trace follows the first).
    """
    tags = iter(range(draw(st.integers(0, 50)) * 10, 10_000))
    ds = _head(draw, depth, tags)
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.sampled_from(sorted([*DRAWN, *UNDRAWN])))
        try:
            if name in UNDRAWN:
                ds = UNDRAWN[name][1](draw, ds)
            else:
                ds = apply_op(
                    sample_op(draw, {name: DRAWN[name]}, KEEPS_ELEMENTS), ds, KEEPS_ELEMENTS
                )
        except ValueError:
            continue  # the stage refuses this draw
        if ds.length == 0:
            break
    return ds, contains_batch(ds)


def _head(draw: Any, depth: int, tags: Any) -> Dataset[Any]:
    kind = draw(
        st.sampled_from(["source", "mix", "concatenate", "select"] if depth else ["source"])
    )
    if kind == "source":
        return tagged_source(next(tags), draw(st.integers(1, 12)))
    parts = [_head(draw, depth - 1, tags) for _ in range(draw(st.integers(1, 3)))]
    parts = [fn.repeat(2, p) if p.length < INFINITE else p for p in parts]
    if kind == "mix":
        weights = draw(st.lists(st.integers(1, 4), min_size=len(parts), max_size=len(parts)))
        return fn.mix(parts, weights)
    if kind == "concatenate":
        return fn.concatenate([p for p in parts if p.length < INFINITE] or [tagged_source(0, 3)])
    table = [
        (d, draw(st.integers(0, 20)))
        for d in draw(st.lists(st.integers(0, len(parts) - 1), min_size=1, max_size=8))
    ]
    return fn.select_from_datasets(parts, table)


def first_value(element: Any) -> Any:
    """The first source element inside an element (batches nest it at [0][0]...)."""
    return np.asarray(element).flat[0]


@given(pipelines(), st.integers(0, 10**6))
def test_traced_source_element_is_the_element(drawn: tuple[Dataset[Any], bool], seed: int) -> None:
    ds, batched = drawn
    if ds.length == 0:
        return
    span = ds.length if ds.length < INFINITE else 1000
    for index in {seed % span, seed % (3 * span), 0}:
        try:
            element = ds.get(index)
        except (IndexError, OverflowError):  # a stage cannot read this epoch
            if not batched:  # (a batch may fail on an index after the first, which trace skips)
                with pytest.raises(IndexError):
                    fn.trace(ds, index)
            continue
        except ValueError:  # a batch of batches of unequal sizes cannot be stacked
            continue
        path = fn.trace(ds, index)
        assert path.steps[0].index == index
        assert path.source.parents == ()
        expected = path.source.get(path.source_index)
        assert first_value(element) == expected
        assert first_value(ds.get_many([index])[0]) == expected


def test_trace_rows_through_shuffle_slice_repeat() -> None:
    ds = fn.map(str, fn.slice(slice(1, None, 2), fn.repeat(2, fn.shuffle(fn.range(5), seed=4))))
    path = fn.trace(ds, 3)
    stages = [step.stage for step in path.steps]
    assert stages == [
        "map(str)",
        "slice(start=1, stop=11, step=2)",
        "repeat(2 epochs)",
        "shuffle(seed=4)",
        "range(0, 5, 1)",
    ]
    assert [step.index for step in path.steps[:4]] == [3, 3, 7, 7]
    from grainfn._src.index.shuffle import shuffle_index

    assert path.source_index == shuffle_index(7, 5, 4)
    assert path.steps[3].note == "epoch 1"
    assert ds.get(3) == str(fn.range(5).get(path.source_index))


def test_trace_names_the_mix_component() -> None:
    a, b = tagged_source(1, 4), tagged_source(2, 6)
    ds = fn.mix([a, b], [1, 2])
    for index in range(ds.length):
        path = fn.trace(ds, index)
        component = int(path.steps[0].note.split()[1])
        assert path.steps[0].note.endswith("of 2")
        assert path.source is (a, b)[component]
        assert ds.get(index) == path.source.get(path.source_index)


def test_trace_through_concatenate_and_select() -> None:
    a, b = tagged_source(1, 3), tagged_source(2, 2)
    concat = fn.concatenate([a, b])
    assert [fn.trace(concat, i).source_index for i in range(6)] == [0, 1, 2, 0, 1, 3]
    assert fn.trace(concat, 4).source is b
    assert fn.trace(concat, 4).steps[0].note == "component 1 of 2"
    selected = fn.select_from_datasets([a, b], [(1, 1), (0, 2)])
    assert fn.trace(selected, 0).source is b and fn.trace(selected, 0).source_index == 1
    assert fn.trace(selected, 1).source is a and fn.trace(selected, 1).source_index == 2


def test_batch_row_shows_its_range_and_trace_follows_the_first() -> None:
    ds = fn.batch(3, fn.range(10))
    path = fn.trace(ds, 2)
    assert path.steps[0].note == "reads 6..8; following 6"
    assert path.source_index == 6
    last = fn.trace(ds, 3)  # the short last batch
    assert last.steps[0].note == "" and last.source_index == 9


def test_flat_map_parent_index_is_index_over_fan_out() -> None:
    ds = fn.flat_map(copies(3), fn.range(10), max_fan_out=3)
    assert [fn.trace(ds, i).source_index for i in (0, 2, 3, 7, 29)] == [0, 0, 1, 2, 9]


def test_trace_table_and_records() -> None:
    path = fn.trace(fn.batch(2, fn.range(4)), 1)
    assert str(path) == repr(path)
    assert str(path).splitlines() == [
        "stage           index  length  note",
        "batch(2)            1       2  reads 2..3; following 2",
        "range(0, 4, 1)      2       4",
    ]
    assert path.steps[1] == grain.TraceStep("range(0, 4, 1)", 2, 4)
    with pytest.raises(dataclasses_frozen_error()):
        path.steps = ()  # type: ignore[misc]


def dataclasses_frozen_error() -> type[Exception]:
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_timed_stages_add_no_rows() -> None:
    ds = fn.shuffle(fn.range(8), seed=2)
    assert fn.trace(fn.timed(ds), 5) == fn.trace(ds, 5)


def test_streams_are_refused_naming_the_stage() -> None:
    stream = fn.batch(2, fn.from_dataset(fn.range(4)))
    with pytest.raises(TypeError, match=r"'batch\(2\)' is a stream stage.*from_dataset"):
        fn.trace(stream, 0)
    with pytest.raises(TypeError, match="stream stage"):
        fn.trace(fn.iterate(stream), 0)
    with pytest.raises(TypeError, match="MapDataset before to_iter_dataset"):
        grain.trace(grain.MapDataset.range(3).to_iter_dataset(), 0)


def test_bad_indices_and_values() -> None:
    ds = fn.range(5)
    with pytest.raises(IndexError, match="must be >= 0, got -1"):
        fn.trace(ds, -1)
    with pytest.raises(TypeError, match="index"):
        fn.trace(ds, 1.5)  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="empty dataset"):
        fn.trace(fn.slice(slice(3, 3), ds), 0)
    with pytest.raises(IndexError, match="Cannot trace index"):
        fn.trace(fn.shuffle(fn.repeat(None, ds), seed=1), 2**63)
    with pytest.raises(TypeError, match=r"trace takes a grainfn Dataset.*got 'abc' of type str"):
        fn.trace("abc", 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"trace takes a MapDataset.*got 3 of type int"):
        grain.trace(3, 0)


def test_a_stage_that_cannot_say_is_named() -> None:
    ds = fn.zip([fn.range(3), fn.range(4)])
    with pytest.raises(TypeError, match=r"Cannot trace through the stage 'zip\(2 datasets\)'"):
        fn.trace(fn.map(identity, ds), 1)
