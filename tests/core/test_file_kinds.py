"""What is at a path: regular files are read and replaced, anything else is refused by name."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from grainfn._src.core.file_kinds import (
    check_regular_file,
    check_replaceable,
    file_kind,
    not_regular_message,
    what_is_at,
)


def test_file_kind_names_every_kind_of_file(tmp_path: Path) -> None:
    regular, fifo = tmp_path / "file", tmp_path / "fifo"
    regular.write_bytes(b"")
    os.mkfifo(fifo)
    assert file_kind(os.stat(regular).st_mode) == "a regular file"
    assert file_kind(os.stat(tmp_path).st_mode) == "a directory"
    assert file_kind(os.stat(fifo).st_mode) == "a FIFO (named pipe)"
    assert file_kind(os.stat("/dev/null").st_mode) == "a character device"
    assert file_kind(stat.S_IFBLK) == "a block device"
    assert file_kind(stat.S_IFSOCK) == "a socket"
    assert file_kind(stat.S_IFLNK) == "a symbolic link"
    assert file_kind(0o777) == "a special file (mode ?rwxrwxrwx)"


def test_what_is_at_names_a_links_target(tmp_path: Path) -> None:
    link = tmp_path / "link"
    os.symlink("/dev/null", link)
    mode = os.stat(link).st_mode
    assert what_is_at(str(link), mode) == "a symbolic link to '/dev/null', a character device"
    assert what_is_at("/dev/null", mode) == "a character device"


def test_check_regular_file_gives_the_stat_of_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"abc")
    assert check_regular_file(str(path), "TFRecord").st_size == 3
    os.symlink(path, tmp_path / "link")
    assert check_regular_file(str(tmp_path / "link"), "TFRecord").st_size == 3  # followed


def test_check_regular_file_refuses_anything_else(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_regular_file(str(tmp_path / "none"), "TFRecord")
    os.symlink(tmp_path / "none", tmp_path / "dangling")
    with pytest.raises(FileNotFoundError):
        check_regular_file(str(tmp_path / "dangling"), "TFRecord")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"TFRecord file '.*fifo' is a FIFO \(named pipe\), not a"):
        check_regular_file(str(fifo), "TFRecord")
    with pytest.raises(ValueError, match="is a directory, not a regular file"):
        check_regular_file(str(tmp_path), "TFRecord")


def test_the_refusal_says_why_and_what_to_pass() -> None:
    message = not_regular_message("/dev/zero", "ArrayRecord", os.stat("/dev/zero").st_mode)
    assert message == (
        "ArrayRecord file '/dev/zero' is a character device, not a regular file: ArrayRecord "
        "files must be regular files (reading a FIFO or a device would block or never end), "
        "so it is not opened. Pass a regular ArrayRecord file."
    )


def test_check_replaceable_allows_a_new_name_or_a_regular_file(tmp_path: Path) -> None:
    check_replaceable(str(tmp_path / "new"), "ArrayRecord")  # none of these raises
    (tmp_path / "old").write_bytes(b"")
    check_replaceable(str(tmp_path / "old"), "ArrayRecord")
    assert (tmp_path / "old").read_bytes() == b""  # checked, not touched


def test_check_replaceable_refuses_directories_fifos_and_sockets(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="it is a directory, not a regular file"):
        check_replaceable(str(tmp_path), "ArrayRecord")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"Cannot write the ArrayRecord file .* a FIFO"):
        check_replaceable(str(fifo), "ArrayRecord")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(ValueError, match="it is a socket, not a regular file"):
            check_replaceable(str(tmp_path / "sock"), "ArrayRecord")
