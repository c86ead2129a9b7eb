"""The pipeline travels to workers by reference to its data: arrays shared, never copied per worker.

Where an array sits in a worker is read from the worker's own /proc/self/maps:
inside the pipeline's memory file (`memfd:grainfn-pipeline`), inside the file
of a memory-mapped source, or elsewhere (a private copy).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.parallel import shipping, transfer
from grainfn._src.parallel.processes import WorkerError, WorkerPool

from faults.test_process_faults import in_session
from support.leaks import PIPELINE_FILE, descendants, holders, memory_file_ids, open_memory_files
from support.waiting import wait_until

MEMORY_FILE = f"/memfd:{shipping.PIPELINE_FILE_NAME} (deleted)"  # as /proc shows one
IMAGES = 200
SHAPE = (IMAGES, 64, 64, 3)  # 2.4 MB: far above the size left inside the pickle


def images() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 255, SHAPE, dtype=np.uint8)


def mapping_of(array: np.ndarray) -> str:
    """What this process has mapped where `array`'s data starts: a path, or '' (anonymous)."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            low, high = (int(part, 16) for part in fields[0].split("-"))
            if low <= address < high:
                return fields[5].strip() if len(fields) == 6 else ""
    raise AssertionError(f"address {address:#x} is not mapped")


class ImageSource:
    """A custom source holding its images as an attribute; `source[i]` is a view of them."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.data[index]


def where_read(image: np.ndarray) -> tuple[int, str]:
    return os.getpid(), mapping_of(image)


def read_in_workers(dataset: Any, workers: int = 2) -> list[Any]:
    """Every element, each read by a worker (`adaptive=False` pins the work there)."""
    it = fn.iterate(fn.mp_prefetch(workers, fn.from_dataset(dataset), adaptive=False))
    try:
        return list(it)
    finally:
        it.close()


def test_the_pickle_leaves_large_arrays_out_and_holds_no_copy() -> None:
    data = images()
    small = np.arange(3, dtype=np.uint8)
    shipped = shipping.encode_pipeline(fn.map(lambda x: x + small, fn.source(ImageSource(data))))
    assert len(shipped.data) < 20_000
    assert [buffer.nbytes for buffer in shipped.buffers] == [data.nbytes]
    assert np.shares_memory(np.frombuffer(shipped.buffers[0], np.uint8), data)
    loaded = pickle.loads(shipped.data, buffers=shipped.buffers)
    assert np.array_equal(loaded.get(3), data[3] + small)


@pytest.mark.parametrize(
    "where", ["array source", "dict of arrays", "custom source", "map closure"]
)
def test_every_worker_reads_the_arrays_from_the_one_memory_file(where: str) -> None:
    data = images()
    if where == "array source":
        dataset = fn.map(where_read, fn.source(data))
    elif where == "dict of arrays":
        dataset = fn.map(lambda e: where_read(e["image"]), fn.source({"image": data}))
    elif where == "custom source":
        dataset = fn.map(where_read, fn.source(ImageSource(data)))
    else:
        dataset = fn.map(lambda i: where_read(data[i]), fn.range(IMAGES))
    got = read_in_workers(dataset)
    assert {mapping for _, mapping in got} == {MEMORY_FILE}
    assert len({pid for pid, _ in got}) == 2
    assert os.getpid() not in {pid for pid, _ in got}


def test_a_memory_mapped_array_is_mapped_from_its_file_not_copied(tmp_path: Path) -> None:
    path = tmp_path / "images.npy"
    np.save(path, images())
    mapped = np.load(path, mmap_mode="r")
    window = mapped[10:150, :, ::-1]  # a strided view of it: mapped too
    got = read_in_workers(fn.map(lambda i: (where_read(window[i]), window[i]), fn.range(140)))
    assert {mapping for (_, mapping), _ in got} == {str(path)}
    assert all(np.array_equal(image, window[i]) for i, (_, image) in enumerate(got))


def test_a_map_writing_into_its_input_changes_nothing_another_read_sees() -> None:
    data = images()

    def brighten(image: np.ndarray) -> np.ndarray:
        image += 1  # into the source's own array: a private page in a worker
        return image.copy()

    dataset = fn.map(brighten, fn.source(ImageSource(data)))
    first = read_in_workers(dataset)
    again = read_in_workers(dataset)  # new workers, the same memory file
    expected = [image + 1 for image in images()]
    assert all(np.array_equal(a, b) for a, b in zip(first, expected, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(again, expected, strict=True))
    assert np.array_equal(data, images()), "the workers wrote into the parent's array"
    # Without workers the write lands in the source itself, as it would in any program.
    assert all(np.array_equal(a, b) for a, b in zip(fn.iterate(fn.from_dataset(dataset)), expected))


def test_a_read_only_array_stays_read_only_in_the_workers() -> None:
    data = images()
    data.flags.writeable = False

    def write(image: np.ndarray) -> np.ndarray:
        image[0, 0, 0] = 0
        return image

    with pytest.raises(ValueError, match="read-only"):
        read_in_workers(fn.map(write, fn.source(data)))
    with pytest.raises(ValueError, match="read-only"):
        list(fn.iterate(fn.from_dataset(fn.map(write, fn.source(data)))))


@pytest.mark.slow
def test_a_pipeline_is_encoded_once_for_all_its_iterators_and_freed_with_it() -> None:
    gc.collect()
    before_files, before_cached = (
        open_memory_files("self", PIPELINE_FILE),
        shipping.cached_pipelines(),
    )
    dataset = fn.map(lambda image: image[0, 0, 0], fn.source(images()))
    pools = [WorkerPool([dataset], 2) for _ in range(3)]
    for pool in pools:
        pool.start()
    assert pools[0]._shipped is pools[1]._shipped is pools[2]._shipped
    for pool in pools:
        pool.close()
    expected = [int(image[0, 0, 0]) for image in images()]
    assert read_in_workers(dataset) == expected
    held = open_memory_files("self", PIPELINE_FILE)
    assert held > before_files
    for _ in range(20):  # 20 iterators more: the same memory file
        assert read_in_workers(dataset) == expected
        assert open_memory_files("self", PIPELINE_FILE) == held
    assert shipping.cached_pipelines() == before_cached + 1
    del dataset, pools, pool
    gc.collect()
    assert open_memory_files("self", PIPELINE_FILE) == before_files
    assert shipping.cached_pipelines() == before_cached


def test_a_worker_that_replaces_a_dead_one_reads_the_same_memory_file(tmp_path: Path) -> None:
    from faults.faulty import Fault

    fault = Fault(str(tmp_path), frozenset({50}), "sigkill", times=1)
    data = images()
    dataset = fn.map(
        lambda i: (where_read(data[fault(i)]), int(data[i, 0, 0, 0])), fn.range(IMAGES)
    )
    it = fn.iterate(fn.mp_prefetch(2, fn.from_dataset(dataset), adaptive=False))
    got: list[Any] = []
    try:
        while True:
            try:
                got.append(next(it))
            except WorkerError:  # the death: nothing is lost, the next read goes on
                continue
            except StopIteration:
                break
    finally:
        it.close()
    assert [value for _, value in got] == [int(image[0, 0, 0]) for image in data]
    assert {mapping for (_, mapping), _ in got} == {MEMORY_FILE}
    assert len({pid for (pid, _), _ in got}) >= 3  # the two workers and the one that replaced one


KILLED_SCRIPT = """
import numpy as np
from grainfn import fn

if __name__ == "__main__":
    images = np.ones((400, 64, 64, 3), np.uint8)
    endless = fn.from_dataset(fn.repeat(None, fn.source(images)))
    for i, image in enumerate(fn.iterate(fn.mp_prefetch(2, endless, adaptive=False))):
        if i == 3:
            print("reading", flush=True)
"""


@pytest.mark.slow
def test_a_killed_program_leaves_no_pipeline_memory_behind(tmp_path: Path) -> None:
    # Only the program's own processes, and the files they made, are looked at: another
    # program of this user (a test run beside this one) may hold a pipeline file of its own.
    program = tmp_path / "killed.py"
    program.write_text(KILLED_SCRIPT)
    with subprocess.Popen(
        [sys.executable, str(program)], stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline().strip() == "reading"
            started = {process.pid, *in_session(process.pid), *descendants(process.pid)}
            files = {file for pid in started for file in memory_file_ids(pid, PIPELINE_FILE)}
            assert files, "no pipeline file seen"
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # a preempted container: all at once
            process.wait(timeout=30)

    wait_until(lambda: not in_session(process.pid) and not holders(files), "the program and files")
    assert holders(files) == {}  # held by nobody: the kernel freed them


def test_objects_that_are_not_arrays_still_travel_inside_the_pickle() -> None:
    records = [{"id": i, "text": "x" * 100} for i in range(2_000)]
    shipped = shipping.encode_pipeline(fn.source(records))
    assert shipped.buffers == ()
    assert read_in_workers(fn.source(records)) == records


def test_a_memory_file_holds_each_buffer_at_its_aligned_offset() -> None:
    data = [b"abc", b"de"]
    buffers = [memoryview(d) for d in data]
    for alignment, offsets in ((1, (0, 3)), (64, (0, 64))):
        descriptor, got = transfer.write_memory_file(
            shipping.PIPELINE_FILE_NAME, buffers, alignment
        )
        try:
            assert got == offsets
            assert [os.pread(descriptor, len(d), at) for d, at in zip(data, got)] == data
            name = f"/memfd:{shipping.PIPELINE_FILE_NAME}"
            assert os.readlink(f"/proc/self/fd/{descriptor}").startswith(name)
        finally:
            os.close(descriptor)
