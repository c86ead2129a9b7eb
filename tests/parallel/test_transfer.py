"""Tests for grainfn._src.parallel.transfer: messages with memory files beside them, and sweeping.

Blocks encoded and decoded are tested with columns and rings (test_columns.py)
and across processes (test_processes.py); here, the channel and the sweep,
without starting a worker.
"""

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grainfn._src.parallel import transfer
from grainfn._src.parallel.transfer import Channel, Encoded


@pytest.fixture
def channels() -> tuple[Channel, Channel]:
    parent, child = multiprocessing.Pipe()  # a socket pair on this platform
    ends = Channel(parent), Channel(child)
    yield ends
    for end in ends:
        end.close()


def test_a_message_travels_alone_or_with_a_descriptor(channels: tuple[Channel, Channel]) -> None:
    sender, receiver = channels
    sender.send({"block": 1})
    assert receiver.poll()
    assert receiver.receive() == ({"block": 1}, None)
    reading, writing = os.pipe()
    os.write(writing, b"beside the message")
    os.close(writing)
    sender.send("with a file", reading)
    os.close(reading)  # the receiver has its own descriptor of it now
    message, descriptor = receiver.receive()
    assert message == "with a file"
    assert descriptor is not None
    assert os.read(descriptor, 100) == b"beside the message"
    os.close(descriptor)
    assert not receiver.poll()


def test_receiving_from_a_closed_end_is_an_eof(channels: tuple[Channel, Channel]) -> None:
    sender, receiver = channels
    sender.close()
    sender.close()  # twice: nothing left to close
    with pytest.raises(EOFError):
        receiver.receive()


def test_an_encoded_block_releases_its_memory_file_once() -> None:
    reading, writing = os.pipe()
    os.close(writing)
    encoded = Encoded(b"pickle", reading, [10])
    encoded.close()
    assert encoded.descriptor is None
    encoded.close()
    assert (Encoded(b"", None, []).at, encoded.sizes) == (None, [10])


def test_the_sweep_removes_segments_of_dead_processes_only(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = {
        f"grainfn_{dead.pid}_0": True,  # its process is gone
        f"grainfn_{os.getpid()}_3": False,  # this process is alive
        "grainfn_x_1": False,  # not a segment's name
        "other_1_2": False,
    }
    for name in names:
        (tmp_path / name).write_bytes(b"")
    os.mkdir(tmp_path / f"grainfn_{dead.pid}_9")  # not a regular file
    removed = transfer.sweep_dead_segments(str(tmp_path))
    assert removed == [name for name, gone in names.items() if gone]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name for name, gone in names.items() if not gone] + [f"grainfn_{dead.pid}_9"]
    )


def test_the_sweep_of_a_missing_folder_removes_nothing(tmp_path: Path) -> None:
    assert transfer.sweep_dead_segments(str(tmp_path / "nowhere")) == []


def test_memory_files_hold_the_bytes_of_every_view() -> None:
    descriptor, offsets = transfer.write_memory_file(
        transfer.BLOCK_FILE_NAME, [memoryview(b"abc"), memoryview(b"de")]
    )
    try:
        assert os.pread(descriptor, 10, 0) == b"abcde"
        assert offsets == (0, 3)
        assert os.readlink(f"/proc/self/fd/{descriptor}").startswith("/memfd:grainfn-block")
    finally:
        os.close(descriptor)
