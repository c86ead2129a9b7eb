"""The saved form of a stream's states: versioned, naming its pipeline, refusing another's."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.state_codec import (
    FINGERPRINT_WORDS,
    STATE_VERSION,
    StateCodec,
    pipeline_fingerprint,
    state_from_dict,
    state_to_dict,
)
from grainfn.sources import ArrayRecordDataSource, write_array_records


def batches(size: int = 4) -> Any:
    return fn.batch(size, fn.from_dataset(fn.range(40)))


def test_a_state_round_trips_through_its_dict_form() -> None:
    stream = batches()
    iterator = fn.iterate(stream)
    next(iterator)
    saved = state_to_dict(stream, iterator.state)
    assert saved == {
        "version": STATE_VERSION,
        "pipeline": ["batch(4)", "  from_dataset()", "    range(0, 40, 1)  [length 40]"],
        "state": {"kind": "DatasetPosition", "position": 4},
    }
    assert state_from_dict(stream, copy.deepcopy(saved)) == iterator.state
    assert state_to_dict(fn.range(3), fn.DatasetPosition(1))["pipeline"][0] == "from_dataset()"


def test_a_state_that_does_not_fit_is_refused_before_it_is_saved() -> None:
    with pytest.raises(ValueError, match="State field position must be an integer >= 0"):
        state_to_dict(batches(), fn.DatasetPosition(-1))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: [1], "A state dict is expected, got list"),
        (lambda d: {"next_index": 3}, r"not written by grainfn \(its keys are \['next_index'\]\)"),
        (lambda d: {k: v for k, v in d.items() if k != "state"}, "key 'state' is missing"),
        (lambda d: dict(d, version=2), "State version 2 is not supported"),
        (lambda d: dict(d, pipeline="batch"), "field 'pipeline' must be a list of stage lines"),
        (lambda d: dict(d, pipeline=d["pipeline"][:2]), "it describes 2 stage lines, this"),
        (
            lambda d: dict(d, state={"kind": "DatasetPosition", "position": 99}),
            "position",
        ),
    ],
)
def test_decode_refuses_what_is_not_a_state_of_this_pipeline(change: Any, message: str) -> None:
    codec = StateCodec(batches())
    saved = codec.encode(fn.DatasetPosition(4))
    with pytest.raises(ValueError, match=message):
        codec.decode(change(saved))


def test_another_pipeline_is_named_by_its_first_differing_line() -> None:
    saved = StateCodec(batches(8)).encode(fn.DatasetPosition(8))
    with pytest.raises(
        ValueError, match=r"stage line 0 is 'batch\(8\)' in the state but 'batch\(4\)' here"
    ):
        StateCodec(batches(4)).decode(saved)


def test_a_state_nested_past_the_recursion_limit_is_refused() -> None:
    codec = StateCodec(batches())
    nest: dict[str, Any] = {"kind": "DatasetPosition", "position": 0}
    for _ in range(5000):
        nest = {"kind": "IndexedState", "seen": 0, "parent": nest}
    saved = dict(codec.encode(fn.DatasetPosition(0)), state=nest)
    with pytest.raises(ValueError, match="nested deeper than Python's recursion limit"):
        codec.decode(saved)


def test_a_fingerprint_digests_each_line_and_pads_with_minus_one() -> None:
    short = pipeline_fingerprint(["a", "b"])
    assert len(short) == FINGERPRINT_WORDS
    assert short[2:] == (-1,) * 14
    assert all(0 <= word < 2**31 for word in short[:2])
    assert short == pipeline_fingerprint(["a", "b"]) and short[0] != short[1]
    long = pipeline_fingerprint([str(i) for i in range(20)])
    assert long[:15] == pipeline_fingerprint([str(i) for i in range(15)])[:15]
    assert long[15] != -1  # the lines past 15, in one digest
    assert long != pipeline_fingerprint([str(i) for i in range(19)])


def test_check_fingerprint_names_the_lines_that_differ() -> None:
    codec = StateCodec(batches(4))
    codec.check_fingerprint(np.asarray(codec.fingerprint, np.int32), "The state")
    other = StateCodec(batches(8)).fingerprint
    with pytest.raises(ValueError, match=r"differs in stage line 0, 'batch\(4\)' here"):
        codec.check_fingerprint(other, "The state")
    longer = [*codec.fingerprint[:3], 5, *codec.fingerprint[4:]]  # a fourth line
    with pytest.raises(ValueError, match=r"differs in stage line 3, which this pipeline lacks\."):
        codec.check_fingerprint(longer, "The state")
    for bad in ([1, 2], ["a"] * 16, [2**31] * 16, None):
        with pytest.raises(ValueError, match=r"The state holds pipeline fingerprint .* it must be"):
            codec.check_fingerprint(bad, "The state")


def test_a_pipeline_reading_files_saves_and_checks_their_fingerprints(tmp_path: Path) -> None:
    paths = write_array_records([b"a", b"b", b"c"], tmp_path / "data.array_record")
    stream = fn.from_dataset(fn.source(ArrayRecordDataSource(paths)))
    codec = StateCodec(stream)
    saved = codec.encode(fn.DatasetPosition(1))
    assert list(saved["files"]) == [paths[0]]
    assert codec.decode(saved) == fn.DatasetPosition(1)
    (other,) = write_array_records([b"x", b"y", b"z"], tmp_path / "other.array_record")
    os.replace(other, paths[0])  # the same number of records, other data
    with pytest.raises(ValueError, match="has changed since the state was saved"):
        StateCodec(stream).decode(saved)
    without = {key: value for key, value in saved.items() if key != "files"}
    assert StateCodec(stream).decode(without) == fn.DatasetPosition(1)  # an older state
