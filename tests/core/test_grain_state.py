"""How Grain's state of a stage reads and writes, declared on it: GrainKeys, OwnGrainState."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from grainfn._src.core.grain_state import (
    PARENTS,
    CannotWriteError,
    GrainKeys,
    OwnGrainState,
    read_count,
    read_flag,
)
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
    keys = LimitedStream.grain_state
    assert isinstance(keys, GrainKeys) and keys.record is LimitState
    assert keys.names() == ("parent", "count_elements_read")
    assert keys.build({"taken": 2, "parent": None}) == LimitState(2, None)


def test_a_stage_without_a_writer_is_read_only() -> None:
    read_only = OwnGrainState("ReadOnlyIterDataset", lambda stream, grains, path, beneath: grains)
    assert read_only.read(None, {"x": 1}, "state", print) == {"x": 1}
    assert not read_only.writes and PARENTS.writes and KEYS.writes
    with pytest.raises(CannotWriteError, match="does not determine Grain's"):
        read_only.write(None, None, "state", print)


def test_the_readers_name_the_key_and_the_bad_value() -> None:
    with pytest.raises(ValueError, match=r"Grain's state should hold 'index'"):
        read_count({}, "index", "state")
    with pytest.raises(ValueError, match=r"state.index must be an integer >= 0, got -1"):
        read_count({"index": -1}, "index", "state")
    assert read_flag({"stop": 1}, "stop", "state") is True
    with pytest.raises(ValueError, match=r"state.stop must be true or false"):
        read_flag({"stop": "no"}, "stop", "state")
