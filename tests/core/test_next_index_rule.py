"""Next-index rules: members, never strings, and every one has its get and set."""

from __future__ import annotations

from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.grain_states.next_index import RULES, at_next_index, next_index

SAMPLES: dict[NextIndexRule, Any] = {
    NextIndexRule.PARENT: fn.map(lambda x: x + 1, fn.from_dataset(fn.range(10))),
    NextIndexRule.COUNTER: fn.limit(8, fn.from_dataset(fn.range(10))),
    NextIndexRule.BATCH: fn.batch(2, fn.from_dataset(fn.range(10))),
    NextIndexRule.INTERLEAVE: fn.interleave(1, [fn.range(10)]),
}
"""A pipeline whose last stage declares each rule."""


def test_every_rule_has_its_get_and_set() -> None:
    assert set(RULES) == set(NextIndexRule) == set(SAMPLES)


@pytest.mark.parametrize("rule", list(NextIndexRule), ids=lambda rule: rule.name)
def test_each_rule_moves_to_an_index_and_reads_it_back(rule: NextIndexRule) -> None:
    stream = SAMPLES[rule]
    assert type(stream).next_index_rule is rule
    state = at_next_index(stream, stream.init(), 3)
    assert next_index(stream, state) == 3
    assert next_index(stream, stream.step(state)[1]) == 4


def test_a_rule_is_its_member_never_its_name() -> None:
    assert NextIndexRule("counter") is NextIndexRule.COUNTER
    assert not isinstance("counter", NextIndexRule)


def test_a_stage_without_a_rule_has_no_index() -> None:
    stream = fn.filter(lambda x: x > 2, fn.from_dataset(fn.range(10)))
    assert type(stream).next_index_rule is None
    with pytest.raises(NotImplementedError, match="cannot express the position of the stage"):
        next_index(stream, stream.init())
