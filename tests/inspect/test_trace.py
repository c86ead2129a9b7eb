"""trace: the index each stage reads for an element, checked against what `get` returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.core.dataset import INFINITE, Dataset


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


@st.composite
def pipelines(draw: Any, depth: int = 2) -> tuple[Dataset[Any], bool]:
    """Random index pipelines whose element maps keep the source element; and whether batched.

    Returns the dataset and whether it has a batch stage (a batch reads several
    parent indices, where trace follows the first).
    """
    tags = iter(range(draw(st.integers(0, 50)) * 10, 10_000))
    ds = _head(draw, depth, tags)
    seeded = holes = batched = False
    for _ in range(draw(st.integers(0, 5))):
        kinds = ["seed", "shuffle", "window_shuffle", "slice", "take", "map", "random_map"]
        kinds += ["map_with_index", "filter", "flat_map"]
        if ds.length < INFINITE:
            kinds.append("repeat")
        if not holes:
            kinds.append("batch")
        kind = draw(st.sampled_from(kinds))
        seed = None if seeded and draw(st.booleans()) else draw(st.integers(0, 2**32 - 1))
        if kind == "seed":
            ds, seeded = fn.seed(draw(st.integers(0, 100)), ds), True
        elif kind == "shuffle":
            ds = fn.shuffle(ds, seed=seed)
        elif kind == "window_shuffle":
            ds = fn.window_shuffle(draw(st.integers(1, 5)), ds, seed=seed)
        elif kind == "slice":
            start, stop = draw(st.integers(-8, 8)), draw(st.integers(-8, 8) | st.none())
            step = draw(st.sampled_from([1, 2, 3, -1, -2]))
            ds = fn.slice(slice(start, stop, step), ds)
        elif kind == "take":
            positions = draw(st.lists(st.integers(0, 30), min_size=1, max_size=6))
            ds = fn.slice([p % ds.length for p in positions], ds) if ds.length < INFINITE else ds
        elif kind == "repeat":
            epochs = draw(st.integers(1, 3) | st.none())
            ds = fn.repeat(epochs, ds, reseed_each_epoch=draw(st.booleans()))
        elif kind == "map":
            ds = fn.map(identity, ds)
        elif kind == "random_map":
            ds = fn.random_map(ignore_rng, ds, seed=seed)
        elif kind == "map_with_index":
            ds = fn.map_with_index(ignore_index, ds)
        elif kind == "filter":
            ds, holes = fn.filter(keep_all, ds), True
        elif kind == "flat_map":
            fan_out = draw(st.integers(1, 3))
            ds, holes = fn.flat_map(copies(fan_out), ds, max_fan_out=fan_out), True
        else:
            ds = fn.batch(draw(st.integers(1, 4)), ds, drop_remainder=draw(st.booleans()))
            batched = True
        if ds.length == 0:
            break
    return ds, batched


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
