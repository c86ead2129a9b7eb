"""Writing and reading one state file: atomic replaces, regular files only, safe excerpts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from grainfn._src.checkpoint import file_io

STATE_FILE = "process_0-of-1.json"


def test_a_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / STATE_FILE
    file_io.write_atomically(target, b"first")
    inode = os.stat(target).st_ino
    file_io.write_atomically(str(target), b"second")
    assert target.read_bytes() == b"second"
    assert os.stat(target).st_ino != inode  # renamed into place, not rewritten
    assert os.listdir(tmp_path) == [STATE_FILE]
    file_io.write_atomically(target, b"")
    assert file_io.read_state_bytes(target) == b""


def test_a_failed_replace_removes_its_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(IsADirectoryError):
        file_io.write_atomically(target, b'{"version": 1}')
    assert os.listdir(tmp_path) == ["taken"]
    assert os.listdir(target) == []


def test_a_path_without_os_fspath_is_written_through_its_own_methods(tmp_path: Path) -> None:
    class RemotePath:
        """A path like Orbax's epath for remote storage: only its methods reach the file."""

        def __init__(self, path: Path) -> None:
            self.path = path

        def __truediv__(self, name: str) -> RemotePath:
            return RemotePath(self.path / name)

        parent = property(lambda self: RemotePath(self.path.parent))
        name = property(lambda self: self.path.name)

        def open(self, mode: str) -> Any:
            return self.path.open(mode)

        def replace(self, target: RemotePath) -> None:
            self.path.replace(target.path)

        def exists(self) -> bool:
            return self.path.exists()

        def unlink(self) -> None:
            self.path.unlink()

        def read_text(self) -> str:
            return self.path.read_text()

    before = b'{"version": 1}'
    (tmp_path / STATE_FILE).write_bytes(before)
    file_io.write_atomically(RemotePath(tmp_path) / STATE_FILE, b'{"version": 2}')
    assert os.listdir(tmp_path) == [STATE_FILE]
    assert (tmp_path / STATE_FILE).read_bytes() == b'{"version": 2}'
    assert file_io.read_state_bytes(RemotePath(tmp_path) / STATE_FILE) == b'{"version": 2}'
    with pytest.raises(ValueError, match=r"more than the limit of 4 bytes \(3\.8147e-06 MiB\)"):
        file_io.read_state_bytes(RemotePath(tmp_path) / STATE_FILE, limit=4)
    with pytest.raises(IsADirectoryError):  # a failed replace leaves no temporary file
        file_io.write_atomically(RemotePath(tmp_path), before)
    assert os.listdir(tmp_path) == [STATE_FILE]


def test_the_size_limit_admits_a_file_of_exactly_that_size(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    path.write_bytes(b'{"a": 1}')
    assert file_io.read_state_bytes(path, limit=8) == b'{"a": 1}'
    with pytest.raises(ValueError, match=r"is 8 bytes, more than the limit of 7 bytes"):
        file_io.read_state_bytes(path, limit=7)


def test_an_excerpt_keeps_printable_ascii_and_cuts_with_an_ellipsis() -> None:
    assert file_io.excerpt(b"ok \x1b[1m\n\xff") == "ok ?[1m ?"
    assert file_io.excerpt("é\tx") == "? x"
    assert file_io.excerpt("x" * 80) == "x" * 80
    assert file_io.excerpt("x" * 81) == "x" * 77 + "..."
    assert file_io.excerpt("abcde", 2, width=3) == "cde"
    assert file_io.excerpt("abcdefghij", 2, width=6) == "cde..."


def test_a_missing_state_file_is_a_file_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        file_io.read_state_bytes(tmp_path / STATE_FILE)


def test_a_fifo_or_directory_is_refused_unread_naming_what_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"is a FIFO \(named pipe\), not a regular file"):
        file_io.read_state_bytes(fifo)  # (it would block if it were opened to be read)
    with pytest.raises(ValueError, match=f"Iterator state file {tmp_path} is a directory"):
        file_io.read_state_bytes(tmp_path)


def test_check_inside_refuses_only_links_out_of_the_folder(tmp_path: Path) -> None:
    folder, outside = tmp_path / "checkpoint", tmp_path / "elsewhere.json"
    folder.mkdir()
    outside.write_bytes(b"{}")
    (folder / "kept.json").write_bytes(b"{}")
    os.symlink(folder / "kept.json", folder / "in.json")
    os.symlink(outside, folder / "out.json")
    file_io.check_inside(folder / "kept.json", folder)  # none of these raises
    file_io.check_inside(folder / "in.json", folder)
    file_io.check_inside(folder / "not yet written.json", folder)
    file_io.check_inside("gs://bucket/out.json", "gs://bucket")  # remote: no links
    with pytest.raises(ValueError, match=r"out\.json is a link out of the checkpoint folder"):
        file_io.check_inside(folder / "out.json", folder)


def test_printable_escapes_only_names_that_do_not_print() -> None:
    assert file_io.printable("process_0-of-1.json") == "process_0-of-1.json"
    assert file_io.printable("é.json") == "é.json"
    assert file_io.printable("a\nb") == "'a\\nb'"
    assert file_io.printable("\x1b[2J") == "'\\x1b[2J'"


def test_listing_names_at_most_some_and_counts_the_rest() -> None:
    assert file_io.listing([]) == "nothing"
    assert file_io.listing(["a"]) == "a"
    assert file_io.listing(list("abcdefgh")) == "a, b, c, d, e, f, g, h"
    assert file_io.listing(list("abcdefghij")) == "a, b, c, d, e, f, g, h and 2 more"
    assert file_io.listing(["x\ty", "z"], most=1) == "'x\\ty' and 1 more"
