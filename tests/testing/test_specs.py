"""The registry of random pipelines: stages read from their `random_stage` declarations."""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.reading import iterate
from grainfn._src.stages.limit import LimitedStream
from grainfn._src.testing.device_specs import DEVICE, device_dataset_specs
from grainfn._src.testing.specs import (
    ARGUMENTS,
    INTEGERS,
    Functions,
    apply_op,
    build_dataset,
    dataset_specs,
    declared_kinds,
    declared_stages,
    sample_op,
    stream_specs,
)

NO_FUNCTIONS = Functions({}, {}, {}, with_index=False)
EVERY = Functions(jax_draws=True)
FUNCTIONS = {"integers": INTEGERS, "device": DEVICE, "every": EVERY, "none": NO_FUNCTIONS}
ELEMENT_FUNCTIONS = {
    ArgumentKind.PREDICATE,
    ArgumentKind.MAP,
    ArgumentKind.RANDOM_MAP,
    ArgumentKind.KEY_MAP,
    ArgumentKind.INDEX_MAP,
}
"""The kinds of argument that name an element function of `Functions`."""


def classes(level: Any) -> dict[str, type]:
    """The class that declares each stage name at `level`."""
    return {stage.name: kind for kind, stage in declared_stages(level)}


def base(level: Any) -> Any:
    """Data at `level` with a pipeline seed, for stages whose seed may be left out."""
    seeded = fn.seed(1, fn.range(12))
    return seeded if level == "dataset" else fn.seed(1, fn.from_dataset(fn.range(12)))


DECLARED = [
    (level, stage.name) for level in ("dataset", "stream") for _, stage in declared_stages(level)
]
"""Every stage the registry declares, by level and name."""


def test_every_kind_of_argument_is_drawn_and_resolved() -> None:
    assert set(ARGUMENTS) == set(ArgumentKind)


def test_both_levels_declare_stages_and_every_class_is_of_its_level() -> None:
    for level in ("dataset", "stream"):
        kinds = classes(level)
        assert kinds
        assert all(issubclass(kind, Dataset) == (level == "dataset") for kind in kinds.values())


@pytest.mark.parametrize(("level", "name"), DECLARED)
@settings(max_examples=4)
@given(data=st.data())
def test_every_declared_kind_is_sampled_and_built_as_its_class(
    level: Any, name: str, data: st.DataObject
) -> None:
    functions = EVERY
    kinds = declared_kinds(functions, level)
    op = data.draw(st.composite(lambda draw: sample_op(draw, {name: kinds[name]}, functions))())
    assert op[0] == name
    built = apply_op(op, base(level), functions)
    assert type(built) is classes(level)[name]
    if level == "dataset":  # and its first element reads
        list(fn.elements(built, stop=min(built.length, 1)))
    else:
        list(itertools.islice(iterate(built), 1))


@pytest.mark.parametrize("level", ["dataset", "stream"])
@pytest.mark.parametrize("label", sorted(FUNCTIONS))
def test_grain_only_leaves_out_exactly_the_stages_grain_lacks(level: Any, label: str) -> None:
    every = declared_kinds(FUNCTIONS[label], level)
    grain = declared_kinds(FUNCTIONS[label], level, grain_only=True)
    assert grain == {name: stage for name, stage in every.items() if stage.in_grain}


def test_grain_only_leaves_out_take_while_and_the_device_s_stages() -> None:
    assert "take_while" in declared_kinds() and "take_while" not in declared_kinds(grain_only=True)
    device = declared_kinds(DEVICE, "dataset")
    grain = declared_kinds(DEVICE, "dataset", grain_only=True)
    assert {"window_shuffle", "random_map_jax"} <= set(device) - set(grain)


@pytest.mark.parametrize("level", ["dataset", "stream"])
def test_a_stage_naming_an_empty_table_of_functions_is_left_out(level: Any) -> None:
    plain = {s.name for _, s in declared_stages(level) if not set(s.kinds()) & ELEMENT_FUNCTIONS}
    assert set(declared_kinds(NO_FUNCTIONS, level)) == plain
    assert plain < {stage.name for _, stage in declared_stages(level)}


def test_jax_draws_and_with_index_let_in_their_stages() -> None:
    assert "random_map_jax" not in declared_kinds(INTEGERS, "dataset")
    assert "random_map_jax" in declared_kinds(DEVICE, "dataset")
    assert "map_with_index" in declared_kinds(INTEGERS, "stream")
    assert "map_with_index" not in declared_kinds(NO_FUNCTIONS, "stream")


def test_on_device_keeps_the_stages_with_a_device_form() -> None:
    kinds = classes("dataset")
    every = declared_kinds(EVERY, "dataset")
    device = declared_kinds(EVERY, "dataset", on_device=True)
    forms = {name for name in every if kinds[name].device_program is not Dataset.device_program}
    assert set(device) == forms and "filter" in set(every) - forms


@given(dataset_specs(), stream_specs(grain_only=True), device_dataset_specs())
def test_the_strategies_draw_only_their_declared_stages(
    dataset: Any, stream: Any, device: Any
) -> None:
    def ops(spec: Any) -> list[Any]:
        head, *rest = spec
        parts = head[1] if head[0] in ("mix", "concatenate") else ()
        inner = ops(head[1]) if head[0] == "stream" else []
        return rest + inner + [op for part in parts for op in ops(part)]

    grain_datasets = declared_kinds(INTEGERS, "dataset", grain_only=True)
    grain_streams = declared_kinds(INTEGERS, "stream", grain_only=True)
    on_device = declared_kinds(DEVICE, "dataset", on_device=True)
    assert all(op[0] in grain_datasets for op in ops(dataset))
    assert all(op[0] in grain_streams or op[0] in grain_datasets for op in ops(stream))
    assert all(op[0] in on_device for op in ops(device))


def test_a_spec_of_an_unknown_stage_is_refused_naming_the_declared_ones() -> None:
    with pytest.raises(ValueError, match=r"No dataset stage declares 'limit'; .*'shuffle'"):
        apply_op(("limit", 3), fn.range(4))


def test_a_spec_with_the_wrong_number_of_values_is_refused() -> None:
    with pytest.raises(ValueError, match=r"must hold 3 values .*\(slice: 3\)"):
        apply_op(("slice", 1), fn.range(4))
    with pytest.raises(ValueError, match=r"must hold 0 values .*\(index_map: 0\)"):
        apply_op(("map_with_index", "with_index"), fn.range(4))


def test_a_spec_reads_as_before_the_registry() -> None:
    spec = (("range", 12), ("slice", 10, 1, -3), ("repeat", 3, False), ("map_with_index",))
    ds = build_dataset(spec)
    expected = fn.map_with_index(
        lambda i, x: (x % 1009) * 3 + i % 1009,
        fn.repeat(3, fn.slice(slice(10, 1, -3), fn.range(12)), reseed_each_epoch=False),
    )
    assert list(fn.elements(ds)) == list(fn.elements(expected))


def test_two_classes_declaring_one_name_at_a_level_are_refused() -> None:
    class Twin(LimitedStream):
        __module__ = "grainfn._src.stages.twin"
        random_stage = RandomStage("limit", (ArgumentKind.COUNT,))

    with pytest.raises(ValueError, match=r"LimitedStream and .*Twin both declare the stream stage"):
        declared_stages("stream")
    del Twin
    gc.collect()
    assert "limit" in declared_kinds()
