"""The random_stage declaration: its record, the kinds of argument, and reading it off a class."""

from __future__ import annotations

import dataclasses

import pytest

from grainfn._src.core.dataset import dataset_kinds
from grainfn._src.core.random_stage import ArgumentKind, RandomStage, random_stages
from grainfn._src.core.stream import stage_kinds
from grainfn._src.stages.mix import ConcatenatedDataset, MixedDataset, MixedStream, SelectedDataset
from grainfn._src.stages.zip import ZippedDataset, ZippedStream


def test_a_declaration_is_named_by_its_function_unless_given_a_name() -> None:
    plain = RandomStage("random_map", (ArgumentKind.RANDOM_MAP,))
    named = RandomStage("random_map", (ArgumentKind.KEY_MAP,), name="random_map_jax")
    assert (plain.name, named.name) == ("random_map", "random_map_jax")
    assert plain.function == named.function == "random_map"


def test_a_declaration_is_not_in_grain_unless_it_says_so() -> None:
    assert not RandomStage("take_while", (ArgumentKind.PREDICATE,)).in_grain
    assert RandomStage("limit", (ArgumentKind.COUNT,), in_grain=True).in_grain


def test_kinds_lists_the_arguments_then_the_keywords_in_order() -> None:
    stage = RandomStage(
        "random_map",
        (ArgumentKind.KEY_MAP,),
        (("seed", ArgumentKind.SEED), ("rng", ArgumentKind.JAX_RNG)),
    )
    assert stage.kinds() == (ArgumentKind.KEY_MAP, ArgumentKind.SEED, ArgumentKind.JAX_RNG)
    assert RandomStage("map_with_index").kinds() == ()


def test_a_declaration_is_drawn_unless_it_says_so() -> None:
    assert RandomStage("zip", (ArgumentKind.COMPONENTS,)).drawn
    assert not RandomStage("zip", (ArgumentKind.COMPONENTS,), drawn=False).drawn


def test_a_declaration_does_not_lead_unless_it_says_so() -> None:
    assert not RandomStage("seed", (ArgumentKind.SEED,), in_grain=True).leads
    assert RandomStage("seed", (ArgumentKind.SEED,), leads=True).leads


def grain_limit(grain: object, count: int, stream: object) -> object:
    return (grain, count, stream)


def test_a_grain_twin_is_a_function_of_a_stage_in_grain() -> None:
    assert RandomStage("limit", (ArgumentKind.COUNT,), in_grain=True).grain_twin is None
    stage = RandomStage("limit", (ArgumentKind.COUNT,), in_grain=True, grain_twin=grain_limit)
    assert stage.grain_twin is grain_limit
    with pytest.raises(ValueError, match=r"'limit' grain_twin must be a function, of a stage in_"):
        RandomStage("limit", (ArgumentKind.COUNT,), grain_twin=grain_limit)
    with pytest.raises(ValueError, match=r"got 'LimitIterDataset' with in_grain=True"):
        RandomStage("limit", in_grain=True, grain_twin="LimitIterDataset")  # type: ignore[arg-type]


def test_a_declaration_is_a_frozen_value() -> None:
    stage = RandomStage("seed", (ArgumentKind.SEED,), in_grain=True)
    assert stage == RandomStage("seed", (ArgumentKind.SEED,), in_grain=True)
    assert stage != RandomStage("seed", (ArgumentKind.SEED,))
    assert hash(stage) == hash(RandomStage("seed", (ArgumentKind.SEED,), in_grain=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        stage.name = "other"  # type: ignore[misc]


def test_argument_kinds_are_looked_up_by_their_values() -> None:
    assert ArgumentKind("predicate") is ArgumentKind.PREDICATE
    assert len({kind.value for kind in ArgumentKind}) == len(ArgumentKind)
    with pytest.raises(ValueError, match="'predicat'"):
        ArgumentKind("predicat")


@pytest.mark.parametrize("function", ["", "take while", 3])
def test_a_function_that_is_not_a_name_is_refused(function: object) -> None:
    with pytest.raises(ValueError, match=r"name of a function of grainfn\.fn"):
        RandomStage(function)  # type: ignore[arg-type]


def test_arguments_named_by_strings_are_refused_naming_the_kinds() -> None:
    with pytest.raises(TypeError, match=r"tuple of ArgumentKind \(one of \['PREDICATE'"):
        RandomStage("take_while", ("predicate",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple of ArgumentKind"):
        RandomStage("take_while", [ArgumentKind.PREDICATE])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "keywords",
    [
        (("seed", "seed"),),
        (("not a name", ArgumentKind.SEED),),
        (("seed", ArgumentKind.SEED, "extra"),),
        ("seed",),
    ],
)
def test_keywords_must_be_pairs_of_a_name_and_a_kind(keywords: object) -> None:
    with pytest.raises(TypeError, match=r"keywords must be pairs \(keyword, ArgumentKind\)"):
        RandomStage("shuffle", keywords=keywords)  # type: ignore[arg-type]


def test_random_stages_reads_only_what_a_class_declares_itself() -> None:
    one = RandomStage("limit", (ArgumentKind.COUNT,))
    two = (RandomStage("map", (ArgumentKind.MAP,)), RandomStage("map", name="other"))

    class One:
        random_stage = one

    class Two:
        random_stage = two

    class Inherits(One):
        pass

    class Declines(One):
        random_stage = None

    assert random_stages(One) == (one,)
    assert random_stages(Two) == two
    assert random_stages(Inherits) == random_stages(Declines) == random_stages(object) == ()


def test_every_stage_class_of_grainfn_declares_well_formed_random_stages() -> None:
    classes = [*dataset_kinds(), *stage_kinds()]
    declared = {kind: random_stages(kind) for kind in classes}
    assert all(isinstance(s, RandomStage) for stages in declared.values() for s in stages)
    assert any(declared[kind] for kind in dataset_kinds())
    assert any(declared[kind] for kind in stage_kinds())


def test_a_stage_with_components_combines_pipelines() -> None:
    mix = RandomStage("mix", (ArgumentKind.COMPONENTS, ArgumentKind.OPTIONAL_WEIGHTS))
    assert mix.combines and mix.kinds() == (ArgumentKind.COMPONENTS, ArgumentKind.OPTIONAL_WEIGHTS)
    assert RandomStage("concatenate", (ArgumentKind.COMPONENTS,)).combines
    assert not RandomStage("limit", (ArgumentKind.COUNT,)).combines


@pytest.mark.parametrize(
    "arguments",
    [
        (ArgumentKind.COMPONENTS, ArgumentKind.COMPONENTS),
        (ArgumentKind.OPTIONAL_WEIGHTS,),
        (ArgumentKind.OPTIONAL_WEIGHTS, ArgumentKind.COMPONENTS),
        (ArgumentKind.SELECTION_MAP,),
        (ArgumentKind.SELECTION_MAP, ArgumentKind.COMPONENTS),
    ],
)
def test_components_come_once_and_weights_only_after_them(arguments: object) -> None:
    with pytest.raises(ValueError, match=r"COMPONENTS once, and OPTIONAL_WEIGHTS .* only after"):
        RandomStage("mix", arguments)  # type: ignore[arg-type]


def test_a_selection_map_follows_components() -> None:
    stage = RandomStage(
        "select_from_datasets", (ArgumentKind.COMPONENTS, ArgumentKind.SELECTION_MAP)
    )
    assert stage.combines and stage.kinds()[-1] is ArgumentKind.SELECTION_MAP


def test_weights_may_follow_components_as_a_keyword() -> None:
    stage = RandomStage(
        "mix", (ArgumentKind.COMPONENTS,), (("weights", ArgumentKind.OPTIONAL_WEIGHTS),)
    )
    assert stage.combines and stage.kinds()[-1] is ArgumentKind.OPTIONAL_WEIGHTS
    with pytest.raises(ValueError, match="only after it"):
        RandomStage("mix", keywords=(("weights", ArgumentKind.OPTIONAL_WEIGHTS),))


def test_the_heads_of_grainfn_declare_their_components() -> None:
    heads = {
        kind
        for kind in [*dataset_kinds(), *stage_kinds()]
        if any(stage.combines for stage in random_stages(kind))
    }
    drawn = {kind for kind in heads if all(stage.drawn for stage in random_stages(kind))}
    assert drawn == {MixedDataset, ConcatenatedDataset, MixedStream}
    assert heads - drawn == {SelectedDataset, ZippedDataset, ZippedStream}


def test_a_stage_stacks_where_it_takes_a_batch_size() -> None:
    batching = RandomStage(
        "batch", (ArgumentKind.BATCH_SIZE,), (("drop_remainder", ArgumentKind.DROP_REMAINDER),)
    )
    assert batching.stacks
    assert not RandomStage("shuffle", keywords=(("seed", ArgumentKind.OPTIONAL_SEED),)).stacks
