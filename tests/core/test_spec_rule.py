"""Spec rules: members, never strings, and every one that infers has its inference."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.inspect.element_spec import RULES, ShapeDtypeStruct, element_spec


def test_every_rule_that_infers_has_its_inference_and_no_other_has_one() -> None:
    assert set(RULES) == {rule for rule in SpecRule if rule.infers}
    assert [rule for rule in SpecRule if not rule.infers] == [SpecRule.UNKNOWN]


def test_a_rule_is_its_member_never_its_name() -> None:
    assert SpecRule("parent") is SpecRule.PARENT
    assert not isinstance("parent", SpecRule)
    assert SpecRule.PARENT != "parent"
    with pytest.raises(ValueError, match="'parnt' is not a valid SpecRule"):
        SpecRule("parnt")


def test_a_stage_infers_by_the_rule_it_declares() -> None:
    shuffled = fn.shuffle(fn.range(5), seed=1)
    assert type(shuffled).spec_rule is SpecRule.PARENT
    assert element_spec(shuffled) == ShapeDtypeStruct((), np.int64)
    unknown = fn.flat_map(lambda x: [x], fn.range(3), max_fan_out=1)
    assert type(unknown).spec_rule is SpecRule.UNKNOWN
    with pytest.raises(NotImplementedError, match=r"for flat_map\(.*max_fan_out=1\)"):
        element_spec(unknown)
