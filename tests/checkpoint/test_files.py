"""The per-process state file: names, round trips of both iterator kinds, and every refusal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import grainfn as grain
from grainfn._src.checkpoint import files

ONE = (0, 1)


def test_file_names_follow_the_process_index_and_count(tmp_path: Path) -> None:
    assert files.state_file_name(0, 1) == "process_0-of-1.json"
    assert files.state_file_name(3, 8) == "process_3-of-8.json"
    with pytest.raises(ValueError, match=r"process_index must be in \[0, process_count\), got 2"):
        files.state_file_name(2, 2)
    assert files.current_process() == (0, 1)
    it = iter(grain.MapDataset.range(5).to_iter_dataset())
    paths = [files.write_state(tmp_path, it.get_state(), (i, 3)) for i in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "process_0-of-3.json",
        "process_1-of-3.json",
        "process_2-of-3.json",
    ]
    assert paths[1] == tmp_path / "process_1-of-3.json"
    assert files.write_state(str(tmp_path), it.get_state()).name == "process_0-of-1.json"


def test_both_iterator_kinds_round_trip(tmp_path: Path, make_iterator, pipelines) -> None:
    it = make_iterator(pipelines.mixed())
    pipelines.take(it, 4)
    path = files.write_state(tmp_path, it.get_state(), ONE)
    expected = pipelines.rest(it)
    loaded = files.read_state(tmp_path, ONE)
    assert loaded.path == path
    assert loaded.data["state"]["kind"] == "MixState"
    fresh = make_iterator(pipelines.mixed())
    files.set_state_from(fresh, loaded)
    assert pipelines.rest(fresh) == expected


def test_bytes_are_written_as_the_iterator_gave_them(tmp_path: Path, bytes_iterator, pipelines):
    it = bytes_iterator(pipelines.shuffled())
    state = it.get_state()
    path = files.write_state(tmp_path, state, ONE)
    assert path.read_bytes() == state
    assert json.loads(path.read_text())["sampler"] == "sampler-A"


def test_states_that_cannot_be_written_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"get_state\(\) returned a dict that is not JSON-able"):
        files.write_state(tmp_path, {"position": object()}, ONE)
    with pytest.raises(ValueError, match="bytes that are not UTF-8 JSON"):
        files.write_state(tmp_path, b"\x80 not json", ONE)
    with pytest.raises(ValueError, match="returned the JSON of a list"):
        files.write_state(tmp_path, b"[1, 2]", ONE)
    with pytest.raises(TypeError, match="returned a tuple; checkpointing serves iterators"):
        files.write_state(tmp_path, (1, 2), ONE)
    with pytest.raises(TypeError, match="must be a path or a string, got int"):
        files.write_state(3, {}, ONE)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_file_names_the_file_and_what_is_there(tmp_path: Path) -> None:
    state = iter(grain.MapDataset.range(5).to_iter_dataset()).get_state()
    for i in range(2):
        files.write_state(tmp_path, state, (i, 2))
    expected = re.escape(f"{tmp_path / 'process_0-of-1.json'} does not exist")
    with pytest.raises(ValueError, match=expected) as error:
        files.read_state(tmp_path, ONE)
    message = str(error.value)
    assert "process 0 of 1" in message
    assert "process_0-of-2.json, process_1-of-2.json" in message
    assert "Restore with as many JAX processes as saved it" in message

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "model").mkdir()
    with pytest.raises(ValueError, match=r"The directory holds model\. Pass the directory"):
        files.read_state(tmp_path / "other", ONE)
    with pytest.raises(ValueError, match=r"The directory .*nowhere does not exist either"):
        files.read_state(tmp_path / "nowhere", ONE)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is empty: the save that wrote it did not finish"),
        (b"  \n", "is empty"),
        (b"\xff\xfe{}", "is corrupt: it is not UTF-8 text"),
        (b"<html>not json</html>", r"is not JSON \(Expecting value at line 1, column 1\)"),
        (b'{"version": 1} trailing', r"is not JSON \(Extra data at line 1, column 16\)"),
        (b"[1, 2, 3]", "holds a JSON list, not the object"),
        (b'"text"', "holds a JSON str"),
    ],
)
def test_corrupt_files_are_refused_by_name(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "process_0-of-1.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path)) + " " + problem):
        files.read_state(tmp_path, ONE)


def test_every_truncation_of_a_state_file_is_refused(tmp_path: Path, pipelines) -> None:
    it = iter(pipelines.mixed())
    pipelines.take(it, 2)
    text = files.state_json(it.get_state())
    path = tmp_path / "process_0-of-1.json"
    for cut in range(1, len(text) - 1):
        path.write_text(text[:cut])
        with pytest.raises(ValueError, match=re.escape(str(path))) as error:
            files.read_state(tmp_path, ONE)
        assert "is truncated" in str(error.value) or "is empty" in str(error.value), cut


def test_a_state_of_another_pipeline_names_the_file_and_the_difference(
    tmp_path: Path, make_iterator, pipelines
) -> None:
    files.write_state(tmp_path, make_iterator(pipelines.shuffled(seed=7)).get_state(), ONE)
    other = make_iterator(pipelines.shuffled(seed=8))
    before = pipelines.take(make_iterator(pipelines.shuffled(seed=8)), 3)
    with pytest.raises(ValueError) as error:
        files.set_state_from(other, files.read_state(tmp_path, ONE))
    message = str(error.value)
    assert message.startswith(f"Iterator state file {tmp_path / 'process_0-of-1.json'} does not")
    assert "State belongs to another pipeline: stage line 3 is 'shuffle(seed=" in message
    assert pipelines.take(other, 3) == before  # nothing was changed


def test_a_state_missing_a_key_is_refused_as_truncated(tmp_path: Path) -> None:
    it = iter(grain.MapDataset.range(5).to_iter_dataset())
    state = it.get_state()
    del state["state"]
    (tmp_path / "process_0-of-1.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="does not fit this iterator: State dict is truncated"):
        files.set_state_from(it, files.read_state(tmp_path, ONE))
