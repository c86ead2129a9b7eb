"""What grainfn's worker processes could leave behind, counted for the tests.

- worker processes still running;
- memory files (the blocks workers send, see grainfn._src.parallel.transfer)
  still open in this process, or in any process of this user: a file held by
  nobody is freed by the kernel, so one still open is a leak (a pipeline's own
  memory file, `PIPELINE_FILE`, is held while the pipeline lives);
- shared-memory segments in /dev/shm named by grainfn (it makes none any more:
  any found is a leak), counted with the pid that owns them.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import pytest

from grainfn._src.parallel import shipping
from grainfn._src.parallel.ring import RING_FILE_NAME
from grainfn._src.parallel.transfer import BLOCK_FILE_NAME

MEMORY_FILE = f"/memfd:{BLOCK_FILE_NAME}"
PIPELINE_FILE = f"/memfd:{shipping.PIPELINE_FILE_NAME}"
"""A pipeline's arrays, shared with its workers: held while the pipeline lives (see shipping)."""


DEV_SHM = pytest.mark.xdist_group("dev_shm")
"""Marks a test that writes grainfn names in /dev/shm or counts them there (`segments`).

/dev/shm is one folder for the whole machine: under pytest-xdist such tests
run in one worker process, one after another, so none sees another's names.
"""


def workers() -> list[Any]:
    """This process's grainfn worker processes that are still alive."""
    return [p for p in multiprocessing.active_children() if p.name.startswith("grainfn-worker")]


def open_memory_files(pid: int | str = "self", kind: str = MEMORY_FILE) -> int:
    """How many grainfn memory files process `pid` holds open (blocks', or `PIPELINE_FILE`)."""
    count = 0
    directory = f"/proc/{pid}/fd"
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return 0
    for name in names:
        try:
            if os.readlink(f"{directory}/{name}").startswith(kind):
                count += 1
        except OSError:
            continue
    return count


def memory_files_anywhere(kind: str = MEMORY_FILE) -> dict[int, int]:
    """The grainfn memory files open in every process of this user, by pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (count := open_memory_files(entry, kind)):
            found[int(entry)] = count
    return found


def memory_file_ids(pid: int | str = "self", kind: str = PIPELINE_FILE) -> set[tuple[int, int]]:
    """The (device, inode) of each grainfn memory file process `pid` holds open: which files."""
    found = set()
    directory = f"/proc/{pid}/fd"
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return found
    for name in names:
        try:
            if os.readlink(f"{directory}/{name}").startswith(kind):
                stat = os.stat(f"{directory}/{name}")
                found.add((stat.st_dev, stat.st_ino))
        except OSError:
            continue
    return found


def holders(files: set[tuple[int, int]], kind: str = PIPELINE_FILE) -> dict[int, int]:
    """The processes of this user holding any of `files` (`memory_file_ids`) open, by pid.

    A file is told by its identity, not its name: another program's pipeline
    file, of the same name, is not counted.
    """
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (held := len(memory_file_ids(entry, kind) & files)):
            found[int(entry)] = held
    return found


def descendants(pid: int) -> set[int]:
    """The processes running now that `pid` started, at any depth (by their parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def mapped_rings(pid: int | str = "self") -> int:
    """How many workers' rings process `pid` maps (see `grainfn._src.parallel.ring`)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return sum(f"/memfd:{RING_FILE_NAME}" in line for line in f)
    except OSError:
        return 0


def segments() -> dict[str, int]:
    """grainfn's shared-memory segments in /dev/shm, with the uid that owns each."""
    found = {}
    for name in os.listdir("/dev/shm"):
        if "grainfn" in name:
            try:
                found[name] = os.stat(f"/dev/shm/{name}").st_uid
            except FileNotFoundError:
                continue
    return found


def leftovers() -> dict[str, Any]:
    """Everything left behind now: empty when nothing is."""
    left: dict[str, Any] = {
        "workers": workers(),
        "memory files": memory_files_anywhere(),
        "rings mapped here": mapped_rings(),
        "segments": segments(),
    }
    return {what: found for what, found in left.items() if found}


def assert_nothing_left(seconds: float = 60.0) -> None:
    """Waits up to `seconds` for the workers to go; fails naming whatever is left.

    The bound is generous: on a busy machine a worker told to stop can take
    seconds to be scheduled, exit and be reaped. Nothing left returns at once.
    """
    deadline = time.monotonic() + seconds
    while (left := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"left behind: {left}"
