"""Fingerprints of the files a pipeline reads, and the message naming those that changed."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from grainfn import fn
from grainfn._src.core.fingerprints import (
    EDGE,
    changed_files,
    files_read,
    fingerprint,
    fingerprints,
)


def test_a_fingerprint_is_the_size_and_a_digest_of_both_ends(tmp_path: Path) -> None:
    path = tmp_path / "data"
    body = bytes(range(256)) * 100  # 25600 bytes: its middle is not digested
    path.write_bytes(body)
    before = fingerprint(str(path))
    assert before is not None and before.startswith("25600:")
    path.write_bytes(body[:EDGE] + b"\xff" * 100 + body[EDGE + 100 :])  # the middle changed
    assert fingerprint(str(path)) == before
    path.write_bytes(body[:-1] + b"\x00")  # the last byte changed (it was 0xff)
    assert fingerprint(str(path)) not in (None, before)
    path.write_bytes(b"")
    empty = fingerprint(str(path))
    assert empty is not None and empty.startswith("0:")


def test_only_a_regular_file_has_a_fingerprint(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert fingerprint(str(fifo)) is None  # opened without blocking
    assert fingerprint(str(tmp_path)) is None
    assert fingerprint(str(tmp_path / "missing")) is None
    assert fingerprint("/dev/zero") is None


@dataclasses.dataclass(frozen=True)
class FileSource:
    """A data source that reads two files."""

    folder: str

    def file_paths(self) -> Mapping[str, str]:
        return {"a": os.path.join(self.folder, "a"), "b": os.path.join(self.folder, "b")}

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> int:
        return index


def test_files_read_finds_the_files_of_sources_held_by_any_stage(tmp_path: Path) -> None:
    stream = fn.batch(2, fn.from_dataset(fn.map(str, fn.source(FileSource(str(tmp_path))))))
    assert files_read(stream) == {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}
    assert files_read(fn.from_dataset(fn.range(3))) == {}


def test_fingerprints_leave_out_files_not_readable_now(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    files = FileSource(str(tmp_path)).file_paths()
    assert list(fingerprints(files)) == ["a"]
    assert fingerprints(files)["a"] == fingerprint(files["a"])


def test_changed_files_names_the_first_change_and_counts_the_others() -> None:
    files = {name: f"/data/{name}" for name in "abcdef"}
    saved = {name: f"10:{name}" for name in files}
    assert changed_files(files, dict(saved), saved) is None
    current = {"a": "10:a", "b": "11:b", "c": "10:x", "d": "1:d", "e": "1:e", "f": "1:f"}
    message = changed_files(files, current, saved)
    assert message is not None
    assert message.startswith(
        "File 'b' has changed since the state was saved: it had 10 bytes, now 11. 4 more "
        "changed too: 'c', 'd', 'e' and 1 other. The state's"
    )
    assert message.endswith(
        "Restore with the files the checkpoint was written with, or start "
        "the pipeline afresh (without set_state)."
    )
    same_size = changed_files(files, dict(saved, c="10:x"), saved)
    assert same_size is not None and "it has the same size (10 bytes), but its content" in same_size


def test_files_not_read_or_not_readable_now_are_not_compared() -> None:
    saved = {"gone": "3:x", "other pipeline's": "3:y"}
    assert changed_files({"gone": "/data/gone"}, {}, saved) is None


@pytest.mark.parametrize("saved", [["a"], {"a": 3}, {1: "3:x"}, None])
def test_a_files_entry_that_is_not_names_to_fingerprints_is_refused(saved: object) -> None:
    with pytest.raises(ValueError, match="State dict field 'files' must map file names to"):
        changed_files({}, {}, saved)
