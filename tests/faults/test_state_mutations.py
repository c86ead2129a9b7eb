"""A changed state is refused, or read as exactly what it says: never silently something else.

Hypothesis takes a valid state (grainfn's own form, one written by Grain
0.2.18, an elastic host's, a DataLoader's) and changes one thing in it: a
field's value (to another count, a bool, a string, a float, None, a huge
integer, a list, a dict), or drops a field. Restoring the changed state must
either raise ValueError, or be read exactly as written:
- a state equal to one the pipeline passes (grainfn's after k elements, or
  Grain's after k) gives exactly the elements after k;
- any other accepted state gives the same elements as the state `get_state()`
  then names, restored afresh (or the same clear error, such as a strict zip
  whose components end apart).
A counter past what the positions beneath it allow (a Grain `index_for_rng` of
10**12 over position 3, a limit's count past the limit) is refused.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable
from typing import Any

import grain
import pytest
from differential.test_grain_states import as_lists, pipeline
from hypothesis import given
from hypothesis import strategies as st

import grainfn

ODD_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.integers(-2, 45),
    st.sampled_from(
        [-7, 10**12, 2**63, True, False, None, "false", "no", "3", 1.5, 0.0, math.nan, [], {}, [0]]
    ),
    st.just({"kind": "DatasetPosition", "position": 0}),
)
"""What a changed field may hold: nearby counts, far ones, and values of every other JSON type."""

DROP = object()
"""Instead of a value: the field is removed."""


def paths(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every node below the top of a JSON tree (dict keys and list indices)."""
    found = []
    if isinstance(tree, dict):
        items: Any = tree.items()
    else:
        items = enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        found.append((*path, key))
        found.extend(paths(value, (*path, key)))
    return found


def changed(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of `tree` with the node at `path` set to `value` (or removed, for DROP)."""
    out = copy.deepcopy(tree)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is DROP:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@st.composite
def mutations(draw: st.DrawFn, states: list[Any]) -> tuple[Any, bool]:
    """One of `states` with one node changed or dropped, and whether it must be refused.

    It must be where a count or a flag became a value of another type (a
    string, a float, None, a list, a dict), or a flag an integer other than 0
    and 1: no reading of such a value is the state as written.
    """
    state = draw(st.sampled_from(states))
    path = draw(st.sampled_from(paths(state)))
    value = draw(st.one_of(ODD_VALUES, st.just(DROP)))
    was = _node(state, path)
    number = (int, bool)  # bool is an int too
    must_refuse = (
        value is not DROP
        and isinstance(was, number)
        and (not isinstance(value, number) or (type(was) is bool and value not in (0, 1)))
    )
    return changed(state, path, value), must_refuse


def _node(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


class Reference:
    """A pipeline's elements and its states after 0, 1, 2, ... elements, in JSON form."""

    def __init__(self, make: Callable[[], Any], encode: Callable[[Any], Any] = lambda s: s):
        self.make = make
        it = iter(make())
        self.states = [encode(it.get_state())]
        self.elements: list[Any] = []
        for element in it:
            self.elements.append(as_lists([element])[0])
            self.states.append(encode(it.get_state()))
        it.close()

    def after(self, state: Any) -> int | None:
        """How many elements the pipeline gave when it passed `state`, if it did."""
        for taken, passed in enumerate(self.states):
            if passed == state:
                return taken
        return None


def restore(make: Callable[[], Any], state: Any) -> tuple[Any, list[Any]] | None:
    """`(state named by get_state, elements)` after restoring `state`; None if refused.

    A ValueError while reading (a strict zip whose components end apart) ends
    the elements with its name.
    """
    it = iter(make())
    try:
        it.set_state(state)
    except ValueError:
        return None
    named = it.get_state()
    elements: list[Any] = []
    try:
        for element in it:
            elements.extend(as_lists([element]))
    except ValueError as error:  # a state read as written can lead to a clear error
        elements.append(type(error).__name__)
    it.close()
    return named, elements


def check(reference: Reference, mutation: tuple[Any, bool], equal_to: Reference) -> Any:
    """The mutated state is refused or read as written (see the module doc).

    `equal_to` holds the states the mutated one is compared with (the same
    form); `reference` holds grainfn's states and elements for the pipeline.
    Returns the state `get_state()` named after the restore (None if refused).
    """
    mutated, must_refuse = mutation
    outcome = restore(reference.make, mutated)
    if outcome is None:
        return None
    assert not must_refuse, "a count or flag of another type was accepted"
    named, elements = outcome
    taken = equal_to.after(mutated)
    if taken is not None:
        assert elements == reference.elements[taken:], "a state it passes gave other elements"
    again = restore(reference.make, named)
    assert again is not None and again[1] == elements, "the state it names reads otherwise"
    return named


SMALL = ["random_map", "mix of a list", "limit", "repeat", "window shuffle", "interleave",
         "map, filter, batch", "first-fit packing", "flat_map", "zip"]  # fmt: skip
"""Pipelines with a counter of their own, or a state of several parts."""


@functools.cache
def grainfn_reference(name: str) -> Reference:
    return Reference(lambda: pipeline(grainfn, name))


@functools.cache
def grain_states(name: str) -> Reference:
    """Grain's own states of the same pipeline (elements compared elsewhere)."""
    return Reference(lambda: pipeline(grain, name))


@pytest.mark.parametrize("name", SMALL)
@given(data=st.data())
def test_a_changed_grainfn_state_is_refused_or_read_as_written(name: str, data: Any) -> None:
    reference = grainfn_reference(name)
    check(reference, data.draw(mutations(reference.states)), reference)


@pytest.mark.grain
@pytest.mark.parametrize("name", SMALL)
@given(data=st.data())
def test_a_changed_grain_state_is_refused_or_read_as_written(name: str, data: Any) -> None:
    reference, theirs = grainfn_reference(name), grain_states(name)
    mutation = data.draw(mutations(theirs.states[:: max(1, len(theirs.states) // 8)]))
    check(reference, mutation, theirs)


def elastic_host() -> Any:
    ds = grainfn.MapDataset.range(48).seed(3).shuffle().map(lambda x: x * 2)
    return grainfn.experimental.ElasticIterator(
        ds, 4, grainfn.ShardOptions(0, 1), num_logical_shards=2
    )


@functools.cache
def elastic_reference() -> Reference:
    return Reference(elastic_host)


@given(data=st.data())
def test_a_changed_elastic_state_is_refused_or_read_as_written(data: Any) -> None:
    reference = elastic_reference()
    check(reference, data.draw(mutations(reference.states)), reference)


class AddOne(grainfn.transforms.Map):
    def map(self, x: int) -> int:
        return x + 1


class Odd(grainfn.transforms.Filter):
    def filter(self, x: int) -> bool:
        return x % 2 == 1


def loader() -> Any:
    return grainfn.DataLoader(
        data_source=list(range(30)),
        sampler=grainfn.samplers.IndexSampler(30, shuffle=True, seed=2, num_epochs=2),
        operations=[AddOne(), Odd(), grainfn.transforms.Batch(3)],
    )


@functools.cache
def loader_reference() -> Reference:
    return Reference(loader, encode=json.loads)


@given(data=st.data())
def test_a_changed_dataloader_state_is_refused_or_read_as_written(data: Any) -> None:
    reference = loader_reference()
    mutated, must_refuse = data.draw(mutations(reference.states))
    named = check(reference, (mutated, must_refuse), reference)
    if named is None:
        return
    named = json.loads(named)
    # The worker count is only noted: a state restores with any, and names the loader's own.
    assert named.pop("worker_count") == 0
    mutated.pop("worker_count", None)
    assert named == mutated, "the state was not taken as written"


@pytest.mark.parametrize(
    ("name", "state", "words"),
    [
        ("mix of a list", {"parents": [{"next_index": 2}, {"next_index": 2}], "index": 4,
                           "stop": "false"}, "stop must be true or false"),
        ("mix of a list", {"parents": [{"next_index": 2}, {"next_index": 2}], "index": 10**12,
                           "stop": False}, "position is 1000000000000, but at most 4"),
        ("random_map", {"parent": {"next_index": 3}, "index_for_rng": 10**12},
         "seen is 1000000000000, but at most 3"),
        ("limit", {"parent": {"next_index": 2}, "count_elements_read": 10**12},
         "taken is 1000000000000, but at most 25 fits limit(25)"),
        ("repeat", {"parent": {"next_index": 1}, "epoch": 10**12},
         "epoch is 1000000000000, but at most 3 fits repeat(3)"),
        ("window shuffle", {"parent_window_start_state": {"next_index": 5}, "window_index": 10**12,
                            "pos_in_window": 1}, "window is 1000000000000, but at most 1"),
    ],
)  # fmt: skip
def test_the_reported_grain_states_are_refused_naming_the_field(
    name: str, state: dict[str, Any], words: str
) -> None:
    it = iter(pipeline(grainfn, name))
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        it.set_state(state)


def test_an_elastic_state_with_a_string_for_a_flag_is_refused() -> None:
    it = elastic_host()
    state = it.get_state()
    with pytest.raises(ValueError, match=r"stopped='no' .*must be true or false"):
        it.set_state(dict(state, stopped="no"))
    with pytest.raises(ValueError, match=r"step=-1 .*must be an integer >= 0"):
        it.set_state(dict(state, step=-1))
    with pytest.raises(ValueError, match="step is 1000000000000, but at most 0"):
        it.set_state(dict(state, step=10**12))
