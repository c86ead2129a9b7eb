"""State records: registration, checks, host values, and the JSON-able dict form."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np
import pytest

from grainfn._src.core import state
from grainfn._src.core.state import (
    DatasetPosition,
    as_host,
    check_at_most,
    check_record,
    describe_value,
    from_dict,
    is_saved_count,
    json_data,
    to_dict,
)


class Counted(NamedTuple):
    taken: int
    stopped: bool
    parent: Any


class Users(NamedTuple):
    user_state: Any
    components: Any


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, type[Any]]:
    """The records `from_dict` reads, with this module's registered for this test only."""
    records = dict(state.RECORDS)
    monkeypatch.setattr(state, "RECORDS", records)
    state.register(Counted)
    state.register(Users)
    return records


def test_a_nest_of_records_round_trips_through_json(registry: dict[str, type[Any]]) -> None:
    nest = Users({"files": ["a"], "offset": 3.5}, (Counted(2, False, DatasetPosition(9)),))
    data = to_dict(nest)
    assert data == {
        "kind": "Users",
        "user_state": {"files": ["a"], "offset": 3.5},
        "components": [
            {
                "kind": "Counted",
                "taken": 2,
                "stopped": False,
                "parent": {"kind": "DatasetPosition", "position": 9},
            }
        ],
    }
    assert from_dict(json.loads(json.dumps(data))) == nest
    assert to_dict(DatasetPosition(np.int64(4))) == {"kind": "DatasetPosition", "position": 4}


def test_register_refuses_what_is_not_a_record_and_a_clash_of_names(
    registry: dict[str, type[Any]],
) -> None:
    with pytest.raises(TypeError, match="register takes a NamedTuple class, got <class 'dict'>"):
        state.register(dict)
    assert state.register(Counted) is Counted  # the same record again is fine

    class DatasetPosition(NamedTuple):  # another record of a taken name
        position: int

    with pytest.raises(ValueError, match="A state record named DatasetPosition is already"):
        state.register(DatasetPosition)


def test_a_renamed_record_reads_states_saved_under_its_former_name(
    registry: dict[str, type[Any]],
) -> None:
    @state.register(former_names=("OldName",))
    class NewName(NamedTuple):
        count: int

    assert from_dict({"kind": "OldName", "count": 2}) == NewName(2)
    assert to_dict(NewName(2))["kind"] == "NewName"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "Nope"}, r"State at the top has an unknown kind 'Nope'; expected one of \["),
        ({"position": 1}, "unknown kind None"),
        ({"kind": "Counted", "taken": 1, "parent": None}, "field stopped of Counted is missing"),
        (
            {"kind": "Counted", "taken": 1, "stopped": True, "parent": 1, "extra": 0},
            r"State field extra is not part of Counted \(at the top\)",
        ),
        (
            {"kind": "Counted", "taken": 1.5, "stopped": True, "parent": 0},
            r"State field taken must be an integer >= 0, got 1\.5 \(float\)",
        ),
        (
            {"kind": "Counted", "taken": 1, "stopped": "no", "parent": 0},
            "State field stopped must be a bool, got 'no'",
        ),
        (
            {"kind": "Counted", "taken": 1, "stopped": True, "parent": "x"},
            "State field parent must be a state dict",
        ),
        (
            {"kind": "Users", "user_state": None, "components": [{"kind": "DatasetPosition"}]},
            r"field position of DatasetPosition is missing at components\[0\]",
        ),
        (
            {"kind": "Users", "user_state": {"1": (1,)}, "components": []},
            r"State field user_state\['1'\] holds \(1,\) \(tuple\)",
        ),
    ],
)
def test_from_dict_names_the_bad_field(
    registry: dict[str, type[Any]], data: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        from_dict(data)


def test_check_record_checks_the_type_and_every_counter() -> None:
    check_record(Counted(0, np.bool_(True), "anything"), Counted, "limit(3)", "")
    with pytest.raises(ValueError, match=r"at parent: the stage limit\(3\) expects a Counted, got"):
        check_record(DatasetPosition(1), Counted, "limit(3)", "parent")
    with pytest.raises(ValueError, match=r"State field parent\.taken must be an integer >= 0"):
        check_record(Counted(-1, False, None), Counted, "limit(3)", "parent")
    with pytest.raises(ValueError, match=r"State field stopped must be a bool, got 1 \(int\)"):
        check_record(Counted(0, 1, None), Counted, "limit(3)", "")
    check_record(Users(object(), "not checked here"), Users, "s", "")


def test_check_at_most_names_the_field_and_the_bound() -> None:
    check_at_most(5, 5, "", "taken", "the limit")
    check_at_most(10**9, None, "", "taken", "no bound")
    with pytest.raises(ValueError, match="State field taken is 6, but at most 5 fits the limit"):
        check_at_most(6, 5, "", "taken", "the limit")


def test_as_host_turns_0_d_arrays_into_python_numbers() -> None:
    jit_like = Counted(np.array(3, np.int32), np.array(True), (np.uint8(1), 2.5))
    host = as_host(jit_like)
    assert host == Counted(3, True, (1, 2.5))
    assert type(host.taken) is int and type(host.stopped) is bool
    vector = np.arange(2)
    assert as_host(vector) is vector  # not a number: left for the checks
    assert as_host(np.float32(1.5)) == np.float32(1.5)


def test_json_data_takes_json_only() -> None:
    data = {"a": [1, 2.0, None, True, "s"]}
    assert json_data(data) == data and json_data(data) is not data
    with pytest.raises(TypeError, match=r"State field user_state has the key 1 \(int\)"):
        json_data({1: 2})
    with pytest.raises(TypeError, match=r"holds np\.float64\(1\.0\) \(float64\)|holds 1\.0"):
        json_data(np.float64(1.0))
    with pytest.raises(TypeError, match=r"State field x\[0\] holds \(1,\) \(tuple\).*as a list"):
        json_data([(1,)], "x")


def test_saved_counts_and_value_descriptions() -> None:
    assert is_saved_count(0) and is_saved_count(5, 5)
    assert not is_saved_count(-1) and not is_saved_count(False) and not is_saved_count(1.0)
    assert not is_saved_count(np.int64(1))  # a saved (JSON) state holds ints
    assert describe_value("a") == "'a' (str)"
    assert describe_value([1]) == "[1] (list)"
