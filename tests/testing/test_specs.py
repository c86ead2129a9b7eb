"""The registry of random pipelines: stages and heads read from their `random_stage`."""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.reading import iterate
from grainfn._src.core.stream import Stream
from grainfn._src.stages.limit import LimitedStream
from grainfn._src.stages.mix import MixedDataset, SelectedDataset
from grainfn._src.stages.zip import ZippedDataset
from grainfn._src.testing.device_specs import (
    DEVICE,
    DEVICE_SOURCES,
    build_device_dataset,
    device_dataset_specs,
)
from grainfn._src.testing.specs import (
    ARGUMENTS,
    COMPONENT_KINDS,
    INTEGERS,
    Functions,
    _infinite,
    apply_op,
    build_dataset,
    build_head,
    build_stream,
    components_of,
    dataset_specs,
    declared_heads,
    declared_kinds,
    declared_stages,
    sample_head,
    sample_leads,
    sample_op,
    stream_specs,
    unstacked,
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
    (level, stage.name)
    for level in ("dataset", "stream")
    for _, stage in declared_stages(level)
    if not stage.combines
]
"""Every stage the registry declares, by level and name (heads are `HEADS`)."""

HEADS = [
    (level, stage.name)
    for level in ("dataset", "stream")
    for _, stage in declared_stages(level)
    if stage.combines
]
"""Every head the registry declares (a stage that combines pipelines), by level and name:
those the strategies draw and those they do not (`RandomStage.drawn`)."""

LEAVES = {"dataset": (("range", 5),), "stream": (("stream", (("range", 5),), False),)}
"""The simplest spec of each level, for a head's components."""

BUILDERS = {"dataset": build_dataset, "stream": build_stream}

ONCE = settings(database=None, phases=[Phase.generate], max_examples=2000)
"""Settings of `find`: generated afresh, never from a database."""


def test_every_kind_of_argument_is_drawn_and_resolved() -> None:
    assert set(ARGUMENTS) | COMPONENT_KINDS == set(ArgumentKind)
    assert not set(ARGUMENTS) & COMPONENT_KINDS


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
    stages = [stage for _, stage in declared_stages(level) if not stage.combines]
    plain = {s.name for s in stages if not set(s.kinds()) & ELEMENT_FUNCTIONS}
    assert set(declared_kinds(NO_FUNCTIONS, level)) == plain
    assert plain < {stage.name for stage in stages}


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
    def ops(spec: Any, level: Any = "dataset") -> list[Any]:
        head, *rest = spec
        parts = components_of(head, level)
        inner = ops(head[1]) if head[0] == "stream" else []
        return rest + inner + [op for part in parts for op in ops(part, level)]

    def heads(spec: Any, level: Any = "dataset") -> list[tuple[str, str]]:
        head = spec[0]
        inner = heads(head[1]) if head[0] == "stream" else []
        parts = [name for part in components_of(head, level) for name in heads(part, level)]
        return [(level, head[0]), *inner, *parts]

    grain_datasets = declared_kinds(INTEGERS, "dataset", grain_only=True)
    grain_streams = declared_kinds(INTEGERS, "stream", grain_only=True)
    on_device = declared_kinds(DEVICE, "dataset", on_device=True)
    assert all(op[0] in grain_datasets for op in ops(dataset))
    assert all(op[0] in grain_streams or op[0] in grain_datasets for op in ops(stream, "stream"))
    assert all(op[0] in on_device for op in ops(device))
    drawn = {
        (level, name) for level in ("dataset", "stream") for name in declared_heads(EVERY, level)
    }
    leaves = {("dataset", "range"), ("stream", "stream"), *(("dataset", k) for k in DEVICE_SOURCES)}
    found = {*heads(dataset), *heads(stream, "stream"), *heads(device)}
    assert found <= drawn | leaves, found - drawn - leaves


def test_a_spec_of_an_unknown_stage_is_refused_naming_the_declared_ones() -> None:
    with pytest.raises(ValueError, match=r"No dataset stage declares 'limit'; .*'shuffle'"):
        apply_op(("limit", 3), fn.range(4))


def test_a_spec_applied_at_a_level_calls_that_levels_stage_on_the_data_as_given() -> None:
    assert apply_op(("limit", 3), fn.range(4), level="stream") == fn.limit(3, fn.range(4))
    assert isinstance(apply_op(("batch", 2, False), fn.range(4), level="stream"), Dataset)
    with pytest.raises(ValueError, match=r"No stream stage declares 'shuffle'"):
        apply_op(("shuffle", None), fn.range(4), level="stream")


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


@pytest.mark.parametrize(("level", "name"), HEADS)
@settings(max_examples=4)
@given(data=st.data())
def test_every_declared_head_is_sampled_and_built_as_its_class(
    level: Any, name: str, data: st.DataObject
) -> None:
    heads = declared_heads(EVERY, level, undrawn=True)
    head = data.draw(
        st.composite(lambda draw: sample_head(draw, {name: heads[name]}, st.just(LEAVES[level])))()
    )
    assert head[0] == name and components_of(head, level)
    assert all(part == LEAVES[level] for part in components_of(head, level))
    built = build_head(head, BUILDERS[level], level)
    assert type(built) is classes(level)[name]
    assert len(built.parents) == len(components_of(head, level))
    assert isinstance(built, Dataset if level == "dataset" else Stream)


def test_the_heads_of_each_strategy_are_mix_and_concatenate_and_a_stream_mix() -> None:
    assert sorted(declared_heads(INTEGERS, "dataset", grain_only=True)) == ["concatenate", "mix"]
    assert sorted(declared_heads(DEVICE, "dataset", on_device=True)) == ["concatenate", "mix"]
    assert sorted(declared_heads(INTEGERS, "stream")) == ["mix"]
    assert sorted(declared_heads(INTEGERS, "stream", grain_only=True)) == ["mix"]
    assert not set(declared_kinds(EVERY, "dataset")) & {"mix", "concatenate"}


def test_the_heads_the_strategies_do_not_draw_are_declared_all_the_same() -> None:
    every = declared_heads(EVERY, "dataset", undrawn=True)
    assert sorted(every) == ["concatenate", "mix", "select_from_datasets", "zip"]
    assert sorted(declared_heads(EVERY, "stream", undrawn=True)) == ["mix", "zip"]
    assert not every["zip"].drawn and not every["select_from_datasets"].drawn
    assert sorted(declared_heads(EVERY, "dataset", grain_only=True, undrawn=True)) == [
        "concatenate", "mix", "select_from_datasets"
    ]  # fmt: skip
    assert sorted(declared_heads(DEVICE, "dataset", on_device=True, undrawn=True)) == [
        "concatenate", "mix", "select_from_datasets"
    ]  # fmt: skip


def test_a_selection_map_names_only_the_head_s_components() -> None:
    stage = declared_heads(undrawn=True)["select_from_datasets"]
    parts = st.sampled_from([(("range", 2),), (("range", 3),)])
    heads = st.composite(lambda draw: sample_head(draw, {stage.name: stage}, parts))()
    head = find(heads, lambda head: len(head[1]) == 3 and len(head[2]) == 6, settings=ONCE)
    assert all(0 <= component < 3 and 0 <= position <= 5 for component, position in head[2])
    built = build_head(head, build_dataset, "dataset")
    lengths = [part[0][1] for part in head[1]]
    assert type(built) is SelectedDataset
    assert built.get_many(range(6)) == [position % lengths[c] for c, position in head[2]]


@pytest.mark.parametrize("level", ["dataset", "stream"])
def test_the_seed_is_the_one_stage_the_strategies_may_put_first(level: Any) -> None:
    kinds = declared_kinds(EVERY, level)
    assert [name for name, stage in kinds.items() if stage.leads] == ["seed"]
    assert kinds["seed"].kinds() == (ArgumentKind.SEED,)
    leads = st.composite(lambda draw: sample_leads(draw, kinds, EVERY))()
    assert find(leads, lambda specs: not specs, settings=ONCE) == []
    (seed,) = find(leads, bool, settings=ONCE)
    assert seed[0] == "seed" and 0 <= seed[1] < 2**32


def test_a_made_up_leading_stage_is_put_first_by_the_strategies() -> None:
    class FirstLimit(LimitedStream):
        __module__ = "grainfn._src.stages.first_limit"
        random_stage = RandomStage("limit", (ArgumentKind.COUNT,), name="first", leads=True)

    drawn = find(stream_specs(), lambda spec: spec[1:] and spec[1][0] == "first", settings=ONCE)
    built = build_stream((LEAVES["stream"][0], drawn[1]))
    assert isinstance(built, LimitedStream) and built.count == drawn[1][1]
    del FirstLimit
    gc.collect()
    assert "first" not in declared_kinds()


def test_a_mix_draws_one_weight_per_component_or_none() -> None:
    mix = declared_heads()["mix"]
    heads = st.composite(lambda draw: sample_head(draw, {"mix": mix}, st.just(LEAVES["dataset"])))()
    weighted = find(heads, lambda head: head[2] is not None and len(head[1]) == 3, settings=ONCE)
    assert len(weighted[2]) == 3 and all(0.1 <= w <= 5.0 for w in weighted[2])
    assert find(heads, lambda head: head[2] is None, settings=ONCE)[2] is None


def test_hand_written_head_specs_build_as_before_the_registry() -> None:
    parts = ((("range", 4),), (("range", 6),))
    assert build_dataset((("concatenate", parts),)).get_many(range(10)) == [
        0, 1, 2, 3, 0, 1, 2, 3, 4, 5
    ]  # fmt: skip
    assert build_dataset((("mix", parts, (1.0, 1.0)),)).get_many(range(4)) == [0, 0, 1, 1]
    streams = tuple((("stream", part, False),) for part in parts)
    assert list(iterate(build_stream((("mix", streams, None),)))) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert build_device_dataset((("mix", parts, None),)).get_many(range(4)) == [0, 0, 1, 1]


def test_a_head_spec_of_an_unknown_name_or_the_wrong_values_is_refused() -> None:
    with pytest.raises(ValueError, match=r"No stream head declares 'concatenate'; .*'mix'"):
        build_head(("concatenate", ()), build_stream, "stream")
    with pytest.raises(ValueError, match=r"must hold 2 values .*\(components: 1, optional_weights"):
        build_dataset((("mix", ((("range", 2),),)),))
    with pytest.raises(ValueError, match=r"No dataset stage declares 'mix'"):
        apply_op(("mix", (), None), fn.range(4))


def test_a_head_is_endless_where_a_component_is() -> None:
    endless = (("range", 3), ("repeat", None, False))
    assert _infinite(endless) and not _infinite((("range", 3), ("repeat", 2, False)))
    assert _infinite((("mix", ((("range", 3),), endless), None),))
    assert _infinite((("concatenate", (endless,)),))
    assert not _infinite((("mix", ((("range", 3),),), None),))


def test_a_made_up_head_declared_on_its_class_is_drawn_and_built() -> None:
    class UniformMix(MixedDataset):
        __module__ = "grainfn._src.stages.uniform_mix"
        random_stage = RandomStage("mix", (ArgumentKind.COMPONENTS,), in_grain=True, name="even")

    assert "even" in declared_heads(INTEGERS, "dataset", grain_only=True)
    drawn = find(
        dataset_specs(),
        lambda spec: spec[0][0] == "even",
        settings=ONCE,
    )
    assert len(drawn[0]) == 2  # its components, and no weights
    built = build_dataset((drawn[0],))
    assert type(built) is MixedDataset and set(built.weights) == {1.0}
    assert len(built.components) == len(components_of(drawn[0]))
    del UniformMix
    gc.collect()
    assert "even" not in declared_heads()


def test_a_head_s_other_arguments_are_drawn_and_passed_as_a_stage_s() -> None:
    stage = declared_heads(NO_FUNCTIONS, undrawn=True)["zip"]  # its strict is a FLAG
    ranges = st.sampled_from([(("range", 2),), (("range", 3),)])
    heads = st.composite(lambda draw: sample_head(draw, {"zip": stage}, ranges))()
    strict = find(heads, lambda head: head[2] and len(set(head[1])) == 2, settings=ONCE)
    with pytest.raises(ValueError, match="strict"):
        build_head(strict, build_dataset, "dataset")
    loose = find(heads, lambda head: not head[2] and len(set(head[1])) == 2, settings=ONCE)
    built = build_head(loose, build_dataset, "dataset")
    assert type(built) is ZippedDataset and built.length == 2


def test_shape_keeping_strategies_leave_out_exactly_the_stages_that_stack() -> None:
    for level in ("dataset", "stream"):
        kinds = declared_kinds(level=level)
        left_out = set(kinds) - set(unstacked(kinds))
        assert left_out == {name for name, stage in kinds.items() if stage.stacks}
        assert left_out == {"batch"}, level  # today's one stage with a BATCH_SIZE, at each level
