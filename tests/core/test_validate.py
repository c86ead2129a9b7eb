"""Argument checks shared by the combinators: each names the bad value and what is allowed."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn._src.core import validate


def test_seeds_lie_in_0_to_2_to_the_32_unless_another_limit_is_given() -> None:
    assert validate.check_seed(0) == 0
    assert validate.check_seed(np.uint32(2**32 - 1)) == 2**32 - 1
    assert type(validate.check_seed(np.int64(5))) is int
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\), got 4294"):
        validate.check_seed(2**32)
    with pytest.raises(TypeError, match=r"shuffle seed must be an integer in \[0, 2\*\*32\), got "):
        validate.check_seed(1.0, "shuffle seed")
    with pytest.raises(TypeError, match="got True"):
        validate.check_seed(True)
    with pytest.raises(ValueError, match=r"must be an integer in \[0, 10\), got 10"):
        validate.check_seed(10, limit=10)
    assert validate.check_seed(2**70, limit=None) == 2**70
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        validate.check_seed(-1, limit=None)


def test_integer_checks_name_the_value_and_what_is_allowed() -> None:
    assert validate.check_integer(np.int8(-3), "stop") == -3
    with pytest.raises(TypeError, match="stop must be an integer, got '3' of type str"):
        validate.check_integer("3", "stop")
    assert validate.check_nonnegative_int(0, "threads") == 0
    with pytest.raises(TypeError, match="threads must be an integer >= 0, got False"):
        validate.check_nonnegative_int(False, "threads")
    assert validate.check_positive_int(np.array(4), "batch_size") == 4
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        validate.check_positive_int(0, "batch_size")
    with pytest.raises(TypeError, match=r"batch_size must be a positive integer, got 2\.5"):
        validate.check_positive_int(2.5, "batch_size")
    with pytest.raises(ValueError, match="up to 2\\*\\*31 - 1, got 2147483648"):
        validate.check_positive_int(2**31, "length", maximum=validate.INT32_MAX)
    with pytest.raises(ValueError, match="up to 7, got 8"):
        validate.check_positive_int(8, "count", maximum=7)
    assert validate.check_positive_int(7, "count", maximum=7) == 7


def test_integer_or_none_and_is_integer_differ_on_bools() -> None:
    assert validate.integer_or_none(np.uint64(2**64 - 1)) == 2**64 - 1
    assert validate.integer_or_none(True) is None
    assert validate.integer_or_none("1") is None
    assert validate.integer_or_none(np.float64(1.0)) is None
    assert validate.is_integer(True) and validate.is_integer(np.int32(1))
    assert not validate.is_integer(1.0)


class Length:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __len__(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_check_length_names_the_object_and_the_limit() -> None:
    assert validate.check_length(Length(np.int64(5)), "the source S") == 5
    assert validate.check_length(Length(2**63 - 1), "the source S") == 2**63 - 1
    with pytest.raises(ValueError, match=r"len\(\) of the source S must be an integer in \[0, 2"):
        validate.check_length(Length(-1), "the source S")
    with pytest.raises(TypeError, match=r"got 2\.5 of type float"):
        validate.check_length(Length(2.5), "the source S")
    with pytest.raises(RuntimeError, match="broken") as raised:
        validate.check_length(Length(RuntimeError("broken")), "the source S")
    assert raised.value.__notes__ == ["Raised by len() of the source S."]


def test_short_repr_is_short_whatever_the_value() -> None:
    assert validate.short_repr("abc") == "'abc'"
    assert len(validate.short_repr(list(range(10_000)))) <= 80
    assert validate.short_repr("x" * 200, limit=10) == "'xxxxxx..."

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert validate.short_repr(Broken()).startswith("<Broken ")  # not the error


def test_flags_are_bools_and_nothing_read_as_one() -> None:
    assert validate.check_flag(np.bool_(True), "adaptive") is True
    for value in (0, 1, "True", None):
        with pytest.raises(TypeError, match="adaptive must be True or False, got"):
            validate.check_flag(value, "adaptive")


def test_check_callable() -> None:
    assert validate.check_callable(len, "map_fn") is len
    with pytest.raises(TypeError, match="map_fn must be callable, got 3 of type int"):
        validate.check_callable(3, "map_fn")


def test_weights_are_one_positive_finite_number_per_component() -> None:
    assert validate.check_weights((np.float32(0.5), 2), 2) == (0.5, 2.0)
    with pytest.raises(ValueError, match="got 1 weights for 2 datasets"):
        validate.check_weights([1], 2)
    with pytest.raises(TypeError, match="weights must be numbers, got True at position 0"):
        validate.check_weights([True, 1], 2)
    with pytest.raises(TypeError, match="got None at position 1"):
        validate.check_weights([1, None], 2)
    with pytest.raises(TypeError, match="got '1' at position 0"):  # a number's text is no number
        validate.check_weights(["1", 2], 2)
    for bad in (0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="weights must be finite and > 0"):
            validate.check_weights([1, bad], 2)
    with pytest.raises(ValueError, match="weights are too far apart: the smallest, 1e-300"):
        validate.check_weights([1e-300, 1e300], 2)


def test_check_path_takes_text_paths_only() -> None:
    assert validate.check_path(Path("a") / "b.parquet", "Parquet") == "a/b.parquet"
    with pytest.raises(TypeError, match=r"A Parquet path must be a str or os\.PathLike, got 3"):
        validate.check_path(3, "Parquet")
    with pytest.raises(ValueError, match="A Parquet path is the empty string; pass a URI"):
        validate.check_path("", "Parquet", "a URI")


def test_a_position_out_of_range_is_both_a_value_error_and_an_index_error() -> None:
    with pytest.raises(IndexError):
        raise validate.PositionOutOfRangeError("past the end")
    with pytest.raises(ValueError):
        raise validate.PositionOutOfRangeError("past the end")


def test_a_users_stop_iteration_becomes_an_error_naming_the_stage() -> None:
    cause = StopIteration()
    with pytest.raises(validate.UserStopIterationError, match=r"function of map\(f\)") as info:
        validate.note_user_error(cause, "map(f)", "position 3")
    assert info.value.__cause__ is cause
    copy = pickle.loads(pickle.dumps(info.value))  # as it crosses from a worker
    assert str(copy) == str(info.value) and isinstance(copy.__cause__, StopIteration)
    message = r"at source\[4\], reading position 9"
    with pytest.raises(validate.UserStopIterationError, match=message):
        validate.note_source_error(StopIteration(), "source(S)", 4, 9)


def test_other_errors_keep_their_type_and_gain_a_note() -> None:
    error = ValueError("bad")
    validate.note_user_error(error, "filter(p)", "position 2")
    validate.note_source_error(error, "source(S)", 1, 11)
    assert error.__notes__ == [
        "Raised by the function of filter(p), reading position 2.",
        "Raised by the data source source(S), reading source[1] (position 11).",
    ]


def test_verdicts_are_bools_integers_or_one_element_arrays() -> None:
    assert validate.verdict_truth(np.bool_(False)) is False
    assert validate.verdict_truth(np.array([2])) is True
    assert validate.verdict_truth(5) is True
    for bad in (None, "False", 1.0, np.array([1.0]), np.array([True, False])):
        with pytest.raises(TypeError, match="is not a bool"):
            validate.verdict_truth(bad)


def test_an_ambiguous_verdict_says_what_to_return() -> None:
    array = validate.ambiguous_verdict(np.zeros((2, 3)), "filter(p)", "position 1")
    assert "returned an array of shape (2, 3), whose truth value is ambiguous" in str(array)
    text = validate.ambiguous_verdict("yes", "filter(p)", "position 1")
    assert "returned 'yes' (a str). Return True to keep the element" in str(text)
