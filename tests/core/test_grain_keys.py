"""GrainKeys: a stage's state record as Grain's state dict, declared on the stage."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from grainfn._src.core.grain_keys import GrainKeys
from grainfn._src.stages.limit import LimitedStream, LimitState


class Counted(NamedTuple):
    seen: int
    epoch: int
    parent: Any


KEYS = GrainKeys("CountedIterDataset", Counted, (("index", "seen"), ("epoch", "epoch")))


def test_build_makes_the_record_from_its_fields() -> None:
    assert KEYS.build({"seen": 3, "epoch": 1, "parent": "p"}) == Counted(3, 1, "p")
    with pytest.raises(TypeError):
        KEYS.build({"seen": 3})  # a field missing is the record's own error


def test_names_are_grains_keys_the_parents_first() -> None:
    assert KEYS.names() == ("parent", "index", "epoch")
    reads_files = GrainKeys("TFRecordIterDataset", Counted, (("offset", "seen"),), parent=None)
    assert reads_files.names() == ("offset",)
    renamed = GrainKeys("X", Counted, (), parent="parent_state")
    assert renamed.names() == ("parent_state",)


def test_a_declaration_is_frozen_and_compares_by_value() -> None:
    assert GrainKeys("CountedIterDataset", Counted, (("index", "seen"), ("epoch", "epoch"))) == KEYS
    with pytest.raises(AttributeError):
        KEYS.stage = "other"  # type: ignore[misc]


def test_limit_declares_grains_count_of_elements_read() -> None:
    keys = LimitedStream.grain_keys
    assert keys is not None and keys.record is LimitState
    assert keys.names() == ("parent", "count_elements_read")
    assert keys.build({"taken": 2, "parent": None}) == LimitState(2, None)
