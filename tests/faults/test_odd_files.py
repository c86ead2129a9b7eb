"""Odd files lose nothing and hang nothing: atomic state saves, and refusals of non-regular files.

A state file is replaced atomically, so a save that fails on a full disk
leaves the previous state as it was. A state file, an ArrayRecord file or a
TFRecord file that is a FIFO, a device or too large is refused at once with a
ValueError naming it and what it is, before anything blocks on it or reads it
without end. A message that quotes a file it could not use quotes at most 80
printable ASCII characters of it.

Every call that could hang runs in a thread joined with a generous timeout
(`guarded`), so a regression fails the test instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import grainfn as grain
import grainfn.checkpoint
from grainfn import fn
from grainfn._src.checkpoint import background, file_io, files
from grainfn.experimental import TFRecordIterDataset
from grainfn.sources import ArrayRecordDataSource, write_array_records

from support.waiting import GENEROUS

ONE = (0, 1)
STATE_FILE = "process_0-of-1.json"


def small_pipeline() -> grain.IterDataset:
    return grain.MapDataset.range(100).to_iter_dataset()


def saved_small_state(directory: Path) -> tuple[bytes, list[int]]:
    """Saves an iterator after 3 elements to `directory`: the file's bytes and the rest."""
    it = iter(small_pipeline())
    for _ in range(3):
        next(it)
    handler = grainfn.checkpoint.CheckpointHandler()
    handler.save(directory, args=grainfn.checkpoint.CheckpointSave(it))
    return (directory / STATE_FILE).read_bytes(), list(it)


def restore_small(directory: Path) -> list[int]:
    """Restores a new iterator of the small pipeline from `directory`: the elements it gives."""
    handler = grainfn.checkpoint.CheckpointHandler()
    args = grainfn.checkpoint.CheckpointRestore(iter(small_pipeline()))
    return list(handler.restore(directory, args=args))


def release(fifo: Path | None) -> None:
    """Opens both ends of `fifo` for a moment, so that an open blocked on it returns."""
    if fifo is None:
        return
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        with contextlib.suppress(OSError):  # ENXIO: nobody at the other end
            os.close(os.open(fifo, flags))


def guarded(call: Callable[[], Any], what: str, fifo: Path | None = None) -> BaseException:
    """Runs `call` in a thread; fails if it hangs, or if it raises nothing; returns its error."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    thread.join(GENEROUS)
    if thread.is_alive():
        release(fifo)  # let the stuck thread go before failing
        thread.join(GENEROUS)
        raise AssertionError(f"{what} hangs: not finished after {GENEROUS:.0f} s")
    assert "error" in outcome, f"{what} was not refused: it returned {outcome.get('result')!r}"
    return outcome["error"]


# --- Item 6: a failed save leaves the previous state ------------------------------------------

# Saves, under a file size limit of argv[2] bytes, the state of a pipeline of 200 maps (its
# state lists every stage, some 10 KB) into argv[1], which holds a small state already.
FULL_DISK_CHILD = textwrap.dedent(
    """
    import errno, resource, signal, sys

    import grainfn as grain
    import grainfn.checkpoint
    from grainfn._src.checkpoint import files

    def double(x):
        return 2 * x

    ds = grain.MapDataset.range(100)
    for _ in range(200):
        ds = ds.map(double)
    it = iter(ds.to_iter_dataset())
    next(it)
    size = len(files.state_json(it.get_state()))
    files.current_process()  # imports jax before the limit, like the rest
    handler = grainfn.checkpoint.CheckpointHandler()
    limit = int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        handler.save(sys.argv[1], args=grainfn.checkpoint.CheckpointSave(it))
    except OSError as error:
        print("refused", errno.errorcode.get(error.errno), size, flush=True)
    else:
        print("saved", size, flush=True)
    """
)


@pytest.mark.slow
def test_a_save_that_fails_on_a_full_disk_leaves_the_previous_state(tmp_path: Path) -> None:
    before, rest = saved_small_state(tmp_path)
    limit = 2000
    assert len(before) < limit
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHILD, str(tmp_path), str(limit)],
        capture_output=True,
        text=True,
        timeout=3 * GENEROUS,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    verdict, code, size = done.stdout.split()
    assert (verdict, code) == ("refused", "EFBIG"), done.stdout
    assert int(size) > limit  # the new state did not fit: the write really failed midway
    assert (tmp_path / STATE_FILE).read_bytes() == before  # byte for byte
    assert sorted(os.listdir(tmp_path)) == [STATE_FILE]  # no temporary file is left
    assert restore_small(tmp_path) == rest


def test_every_save_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    it = iter(small_pipeline())
    handler = grainfn.checkpoint.CheckpointHandler()
    inode = None
    for step in range(3):
        next(it)
        handler.save(tmp_path, args=grainfn.checkpoint.CheckpointSave(it))
        assert os.listdir(tmp_path) == [STATE_FILE]
        assert files.read_state(tmp_path, ONE).data["state"]["position"] == step + 1
        # A new file each time (renamed into place), never the old one rewritten in place.
        assert os.stat(tmp_path / STATE_FILE).st_ino != inode
        inode = os.stat(tmp_path / STATE_FILE).st_ino
    asyncio.run(background.save(it, tmp_path))  # Orbax v1's background save: the same write
    assert os.listdir(tmp_path) == [STATE_FILE]
    assert restore_small(tmp_path) == list(range(3, 100))


# --- Item 7: state files that are not regular files, or too large -----------------------------


RESTORES = {
    "CheckpointHandler.restore": restore_small,
    "read_all_states": lambda directory: files.read_all_states(directory),
    "load (Orbax v1)": lambda directory: asyncio.run(
        background.load(iter(small_pipeline()), directory)
    ),
}


@pytest.mark.parametrize("restore", RESTORES.values(), ids=RESTORES.keys())
def test_a_fifo_as_the_state_file_is_refused_without_blocking(
    tmp_path: Path, restore: Callable[[Path], Any]
) -> None:
    fifo = tmp_path / STATE_FILE
    os.mkfifo(fifo)
    error = guarded(lambda: restore(tmp_path), "a restore from a FIFO", fifo)
    assert isinstance(error, ValueError), repr(error)
    message = str(error)
    assert f"Iterator state file {fifo} is a FIFO (named pipe), not a regular file" in message
    assert "a state file must be a regular file" in message


def test_a_state_file_linked_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    os.symlink("/dev/zero", tmp_path / STATE_FILE)
    error = guarded(lambda: restore_small(tmp_path), "a restore from /dev/zero")
    assert isinstance(error, ValueError), repr(error)
    assert f"{tmp_path / STATE_FILE} is a link out of the checkpoint folder" in str(error)
    assert "refused unread" in str(error)


def test_a_directory_at_the_state_file_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).mkdir()
    with pytest.raises(ValueError, match=r"is a directory, not a regular file"):
        files.read_state(tmp_path, ONE)


def test_a_link_to_a_state_file_restores_from_inside_the_folder_only(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    _, rest = saved_small_state(saved)
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(saved / STATE_FILE, linked / STATE_FILE)  # out of the folder: refused unread
    with pytest.raises(ValueError, match="is a link out of the checkpoint folder"):
        restore_small(linked)
    os.replace(saved / STATE_FILE, linked / "kept.json")
    (linked / STATE_FILE).unlink()
    os.symlink(linked / "kept.json", linked / STATE_FILE)  # inside it: followed
    assert restore_small(linked) == rest


def test_a_state_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    assert file_io.STATE_FILE_LIMIT == 64 * 2**20
    path = tmp_path / STATE_FILE
    with open(path, "wb") as file:
        file.truncate(file_io.STATE_FILE_LIMIT + 1)  # sparse: nothing is written
    error = guarded(lambda: restore_small(tmp_path), "a restore from a huge file")
    assert isinstance(error, ValueError), repr(error)
    assert (
        f"{path} is 67108865 bytes, more than the limit of 67108864 bytes (64 MiB) for a "
        "state file" in str(error)
    )


JUNK = {
    "control characters and bytes that are not UTF-8": b'{"version": 1, "pipeline": "'
    + b"\x1b[2J\x07\x00\xff\xfe" * 4000,
    "a long line of text that is not JSON": "\x1b]0;owned\x07 é ".encode() + b"A" * 100_000,
    "a long junk line after the JSON": b'{"version": 1}\n' + b"\x1b[31m\x00 junk " * 20_000,
    "a short line that is not JSON": b"<html>\tnot json\r\n</html>",
}


@pytest.mark.parametrize("content", JUNK.values(), ids=JUNK.keys())
def test_a_refusal_quotes_at_most_80_sanitised_characters(tmp_path: Path, content: bytes) -> None:
    (tmp_path / STATE_FILE).write_bytes(content)
    with pytest.raises(ValueError) as error:
        files.read_state(tmp_path, ONE)
    message = str(error.value)
    assert message.isascii() and message.isprintable(), repr(message)
    assert len(message) < 500, message
    quoted = re.search(r'It reads there: "(.*)"\.', message)
    assert quoted is not None, message
    excerpt = quoted[1]
    assert len(excerpt) <= 80, excerpt
    if len(content) > 100:
        assert excerpt.endswith("..."), excerpt
    else:
        assert excerpt == "<html> not json  </html>"


# --- Item 7: ArrayRecord and TFRecord paths that are not regular files ------------------------


def assert_refused_as_fifo(error: BaseException, fifo: Path, kind: str) -> None:
    assert isinstance(error, ValueError), repr(error)
    assert f"{kind} file {str(fifo)!r} is a FIFO (named pipe), not a regular file" in str(error)


def test_a_fifo_as_an_array_record_path_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "data.array_record"
    os.mkfifo(fifo)
    for paths in ([str(fifo)], fifo, str(tmp_path / "*.array_record")):
        error = guarded(
            lambda paths=paths: ArrayRecordDataSource(paths),
            f"ArrayRecordDataSource({paths})",
            fifo,
        )
        assert_refused_as_fifo(error, fifo, "ArrayRecord")


def test_an_array_record_file_swapped_for_a_fifo_is_refused_on_open(tmp_path: Path) -> None:
    [path] = write_array_records([b"a", b"b"], tmp_path / "data")
    source = ArrayRecordDataSource(path)
    assert source[1] == b"b"
    source.close()  # the next read opens the file again
    os.unlink(path)
    os.mkfifo(path)
    error = guarded(lambda: source[0], "a read of an ArrayRecord FIFO", Path(path))
    assert_refused_as_fifo(error, Path(path), "ArrayRecord")


def test_array_records_are_not_written_over_a_fifo(tmp_path: Path) -> None:
    taken = tmp_path / "data-00001-of-00002.array_record"
    os.mkfifo(taken)
    error = guarded(
        lambda: write_array_records([b"a", b"b"], tmp_path / "data", num_shards=2),
        "write_array_records over a FIFO",
        taken,
    )
    assert isinstance(error, ValueError), repr(error)
    assert f"Cannot write the ArrayRecord file {str(taken)!r}: it is a FIFO" in str(error)
    assert os.listdir(tmp_path) == [taken.name]  # no shard was written


def test_a_fifo_as_a_tfrecord_path_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "data.tfrecord"
    os.mkfifo(fifo)
    reads = {
        "TFRecordIterDataset": lambda: next(iter(TFRecordIterDataset(fifo))),
        "fn.tfrecord": lambda: next(fn.iterate(fn.tfrecord(fifo))),
    }
    for what, read in reads.items():
        assert_refused_as_fifo(guarded(read, what, fifo), fifo, "TFRecord")
    error = guarded(lambda: fn.write_tfrecords(fifo, [b"a"]), "write_tfrecords(FIFO)", fifo)
    assert isinstance(error, ValueError), repr(error)
    assert f"Cannot write the TFRecord file {str(fifo)!r}: it is a FIFO" in str(error)


def test_a_tfrecord_state_for_a_fifo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.tfrecord"
    fn.write_tfrecords(path, [b"a", b"bc"])
    it = iter(TFRecordIterDataset(path))
    next(it)
    state = it.get_state()
    it.close()
    fresh = iter(TFRecordIterDataset(path))
    os.unlink(path)
    os.mkfifo(path)
    error = guarded(lambda: fresh.set_state(state), "set_state of a TFRecord FIFO", path)
    assert_refused_as_fifo(error, path, "TFRecord")


def test_a_tfrecord_path_linked_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "zero.tfrecord"
    os.symlink("/dev/zero", link)
    error = guarded(lambda: next(iter(TFRecordIterDataset(link))), "a read of /dev/zero")
    assert isinstance(error, ValueError), repr(error)
    assert "is a symbolic link to '/dev/zero', a character device, not a regular file" in str(error)
