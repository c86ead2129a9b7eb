"""Bad input is refused at once, naming the bad value and what is allowed; user errors say where.

Also: both faces mix a dict of named components with a list of weights by one
rule, in the core (the list goes with the dict's own order).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.testing.specs import Functions, Level

from support.registry import (
    FIXED_FUNCTIONS,
    simplest_stage,
    user_function_kinds,
    user_function_stages,
)

TEN = grain.MapDataset.range(10)
NO_SHARDING = grain.sharding.NoSharding()


def loader_iterator() -> Any:
    return iter(grain.DataLoader(data_source=list(range(10)), sampler=grain.SequentialSampler(10)))


REFUSED = {
    "batch of 2**63": (
        lambda: TEN.batch(2**63),
        ValueError,
        r"batch_size must be a positive integer up to 2\*\*63 - 1, got 922337203685477580",
    ),
    "iter batch of 2**63": (
        lambda: TEN.to_iter_dataset().batch(2**63),
        ValueError,
        r"up to 2\*\*63 - 1, got 9223372036854775808",
    ),
    "fn.batch of 2**63": (lambda: fn.batch(2**63, fn.range(3)), ValueError, r"up to 2\*\*63 - 1"),
    "weight of 1e-320": (
        lambda: grain.MapDataset.mix([TEN, TEN], [1e-320, 1]),
        ValueError,
        r"too far apart: the smallest, 1e-320 at position 0",
    ),
    "iter weight of 1e-320": (
        lambda: grain.IterDataset.mix([TEN.to_iter_dataset()] * 2, [1, 1e-320]),
        ValueError,
        r"the smallest, 1e-320 at position 1",
    ),
    "float slice": (
        lambda: TEN[1.5:3],
        TypeError,
        r"slice start must be an integer or None, got 1.5 of type float",
    ),
    "float slice step": (
        lambda: TEN[::0.5],
        TypeError,
        r"slice step must be an integer or None, got 0.5",
    ),
    "num_records of 2**64": (
        lambda: grain.IndexSampler(num_records=2**64, shard_options=NO_SHARDING),
        ValueError,
        r"num_records must be a positive integer up to 2\*\*63 - 1, got 18446744073709551616",
    ),
    "num_epochs of 2**62": (
        lambda: grain.IndexSampler(10, NO_SHARDING, num_epochs=2**62),
        ValueError,
        r"num_epochs \* num_records .* 2\*\*63 - 1: got 4611686018427387904 epochs of 10 records",
    ),
    "get_many of 2**63": (
        lambda: fn.range(10).get_many([2**63]),
        IndexError,
        r"indices must be in \[0, 2\*\*63 - 1\], got 9223372036854775808",
    ),
    "get_many of 2**64": (
        lambda: fn.shuffle(fn.range(10), seed=1).get_many([3, 2**64]),
        IndexError,
        r"got 18446744073709551616",
    ),
    "get of 2**63": (
        lambda: fn.range(10).get(2**63),
        IndexError,
        r"index must be at most 2\*\*63 - 1, got 9223372036854775808",
    ),
    "a loader state that is not one": (
        lambda: loader_iterator().set_state({"a": 1}),
        ValueError,
        r"not a DataLoader state: .* got fields \['a'\]",
    ),
    "a sampler past the source": (
        lambda: grain.DataLoader(
            data_source=list(range(10)), sampler=grain.IndexSampler(20, NO_SHARDING, num_epochs=1)
        ),
        ValueError,
        r"reads records 0 to 19 \(num_records=20\), and the data source has 10",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_bad_input_is_refused_naming_the_value_and_what_is_allowed(case: str) -> None:
    call, error, message = REFUSED[case]
    with pytest.raises(error, match=message):
        call()


def test_the_largest_batch_size_is_allowed() -> None:
    assert [b.tolist() for b in TEN.batch(sys.maxsize)] == [list(range(10))]
    assert [b.tolist() for b in TEN.to_iter_dataset().batch(sys.maxsize)] == [list(range(10))]


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("position", 1.5, "an integer >= 0"), ("position", "7", "an integer >= 0")],
)
def test_a_bad_state_field_names_what_it_allows(field: str, value: Any, allowed: str) -> None:
    it = iter(TEN.to_iter_dataset())
    state = it.get_state()
    state["state"][field] = value
    with pytest.raises(ValueError, match=f"State field {field} must be {allowed}, got"):
        it.set_state(state)
    state["state"][field] = True
    with pytest.raises(ValueError, match=f"State field {field} must be an integer >= 0, got True"):
        it.set_state(state)


def test_a_bad_stopped_field_asks_for_a_bool() -> None:
    left, right = TEN.to_iter_dataset(), TEN.to_iter_dataset()
    it = iter(grain.IterDataset.mix([left, right]))
    state = it.get_state()
    state["state"]["stopped"] = 0.5
    with pytest.raises(ValueError, match=r"State field stopped must be a bool, got 0\.5"):
        it.set_state(state)


def array_verdict(x: int) -> np.ndarray:
    return np.arange(3) > x


@pytest.mark.parametrize("level", ["map", "iter", "worker"])
def test_a_filter_returning_an_array_says_so(level: str) -> None:
    ds: Any = TEN.filter(array_verdict).to_iter_dataset()
    if level == "iter":
        ds = TEN.to_iter_dataset().filter(array_verdict)
    if level == "worker":
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=1, adaptive=False))
    message = r"filter\(array_verdict\) must return a bool; .* returned an array of shape \(3,\)"
    with pytest.raises(TypeError, match=message):
        list(ds)


class ParseError(Exception):
    pass


def parse(x: int) -> int:
    if x == 6:
        raise ParseError(f"cannot parse {x}")
    return x


def parse_random(x: int, rng: np.random.Generator) -> int:
    return parse(x)


def keep(x: int) -> bool:
    return parse(x) >= 0


TWO_WORKERS = grain.MultiprocessingOptions(num_workers=2, adaptive=False)  # read in them
STREAM_ELEMENT_7 = r"the stream element that ends at state DatasetPosition\(position=7\)"
USER_FUNCTIONS = {
    "map": (lambda: TEN.map(parse).to_iter_dataset(), r"map\(parse\), reading position 6"),
    "random_map": (
        lambda: TEN.random_map(parse_random, seed=1).to_iter_dataset(),
        r"random_map\(parse_random, seed=1\), reading position 6",
    ),
    "filter": (lambda: TEN.filter(keep).to_iter_dataset(), r"filter\(keep\), reading position 6"),
    "map in a worker": (
        lambda: TEN.map(parse).to_iter_dataset().mp_prefetch(TWO_WORKERS),
        r"map\(parse\), reading position 6",
    ),
    "iter map": (
        lambda: TEN.to_iter_dataset().map(parse),
        rf"map\(parse\), reading {STREAM_ELEMENT_7}",
    ),
    "iter random_map": (
        lambda: TEN.to_iter_dataset().random_map(parse_random, seed=1),
        r"random_map\(parse_random, seed=1\), reading element 6 of its stream",
    ),
    "iter filter": (
        lambda: TEN.to_iter_dataset().filter(keep),
        rf"filter\(keep\), reading {STREAM_ELEMENT_7}",
    ),
    "get_many": (
        lambda: [TEN.map(parse)._core.get_many(range(10))],
        r"map\(parse\), reading position 6",
    ),
}


@pytest.mark.parametrize("case", USER_FUNCTIONS)
def test_an_error_in_a_user_function_keeps_its_type_and_names_stage_and_position(case: str) -> None:
    make, where = USER_FUNCTIONS[case]
    with pytest.raises(ParseError, match="cannot parse 6") as caught:
        for _ in make():
            pass
    notes = "\n".join(caught.value.__notes__)
    assert re.search(f"Raised by the function of {where}", notes), notes
    if "worker" in case:  # the worker's traceback comes as a note
        assert 'in parse\n    raise ParseError(f"cannot parse {x}")' in notes
    else:  # the user's own frame is kept
        assert caught.traceback[-1].name == "parse"


FAILING = Functions(
    maps={"parse": parse},
    random_maps={"parse_random": parse_random},
    filters={"keep": keep},
    with_index=False,
)
"""The element functions of drawn stages: each raises ParseError at 6."""

DRAWN = user_function_stages(FAILING)
"""The declared stages that take a user's function, by level and name, drawn with FAILING."""


AT_6 = rf"reading (position 6|{STREAM_ELEMENT_7}|element 6 of its stream)"


@pytest.mark.parametrize(("level", "name"), sorted(DRAWN))
def test_every_declared_stage_that_calls_a_user_function_keeps_its_error(
    level: Level, name: str
) -> None:
    stage = DRAWN[level, name]
    with pytest.raises(ParseError, match="cannot parse 6") as caught:
        for _ in fn.iterate(simplest_stage(level, stage, FAILING, fn.seed(1, fn.range(10)))):
            pass
    notes = "\n".join(caught.value.__notes__)
    assert re.search(rf"Raised by the function of {stage.function}\(.*, {AT_6}", notes), notes
    assert caught.traceback[-1].name == "parse"  # the user's own frame is kept


def test_every_declared_stage_that_calls_a_user_function_is_drawn_or_named() -> None:
    assert user_function_kinds() - set(DRAWN) == set(FIXED_FUNCTIONS), "declared, so drawn"


def letters(letter: str) -> Any:
    return grain.MapDataset.source([letter] * 8).to_iter_dataset()


def fn_letters(letter: str) -> Any:
    return fn.from_dataset(fn.source([letter] * 8))


def test_both_faces_give_a_list_of_weights_to_the_dicts_own_order() -> None:
    facade = grain.IterDataset.mix({"b": letters("b"), "a": letters("a")}, [3, 1])
    core = fn.mix({"b": fn_letters("b"), "a": fn_letters("a")}, [3, 1])
    by_name = grain.IterDataset.mix({"b": letters("b"), "a": letters("a")}, {"b": 3, "a": 1})
    assert "".join(facade) == "".join(fn.iterate(core)) == "".join(by_name) == "abbbabbbabb"
