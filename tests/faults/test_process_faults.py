"""Faults around the processes: killed workers and process groups, squatters, forks, a full
/dev/shm, a refused memory file and Ctrl-C. Nothing is lost and nothing outlives its process.

Blocks of large arrays cross from the workers in anonymous memory files
(`grainfn._src.parallel.transfer`): nothing in /dev/shm to leak, squat or
fill. The tests count what could be left: worker processes, memory files open
in any process, and segments in /dev/shm (see `leaks`).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src.parallel.processes import WorkerError
from grainfn._src.parallel.transfer import sweep_dead_segments
from grainfn.testing import assert_elements_equal

from faults.faulty import Fault, FaultError
from faults.harness import payload, read_through, reference_states
from support.leaks import (
    DEV_SHM,
    MEMORY_FILE,
    assert_nothing_left,
    descendants,
    holders,
    memory_file_ids,
    segments,
    workers,
)
from support.waiting import inside_a_call_from, wait_until

MIB = 1 << 20
# adaptive=False: every read in the workers, where the faults are (read in this process
# while the workers start, a fault that kills would kill the test run).
TWO_WORKERS = grain.MultiprocessingOptions(num_workers=2, adaptive=False)
FACES = ("mp_prefetch", "DataLoader")


def large(x: int) -> np.ndarray:
    """16 MiB filled with x."""
    return np.full(2 * MIB, x, np.float64)


class MapOf(grain.transforms.Map):
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def map(self, element: Any) -> Any:
        return self.fn(element)


def two_workers(face: str, count: int, fn: Any) -> Any:
    """`fn` of 0, 1, ..., count - 1, computed by 2 worker processes of `face`."""
    if face == "mp_prefetch":
        return grain.MapDataset.range(count).map(fn).to_iter_dataset().mp_prefetch(TWO_WORKERS)
    return grain.DataLoader(
        data_source=list(range(count)),
        sampler=grain.SequentialSampler(count),
        operations=[MapOf(fn)],
        worker_count=2,
        adaptive=False,
    )


# The same in a script: `large` and a pipeline of either face, `make(count)`.
SCRIPT_PIPELINES = """
import numpy as np
import grainfn as grain

def large(x):
    return np.full(2 << 20, x, np.float64)

class Large(grain.transforms.Map):
    def map(self, x):
        return large(x)

def make(count):
    if FACE == "mp_prefetch":
        ds = grain.MapDataset.range(count).map(large).to_iter_dataset()
        return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2, adaptive=False))
    return grain.DataLoader(
        data_source=list(range(count)), sampler=grain.SequentialSampler(count),
        operations=[Large()], worker_count=2, adaptive=False,
    )
"""


def script_for(face: str, body: str) -> str:
    return f"FACE = {face!r}\n" + SCRIPT_PIPELINES + textwrap.dedent(body)


def assert_large(elements: list[Any], count: int) -> None:
    assert [int(e[0]) for e in elements] == list(range(count))
    assert all(e.shape == (2 * MIB,) and e[-1] == e[0] for e in elements)


def run_script(tmp_path: Path, body: str, prefix: list[str] | None = None) -> str:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    done = subprocess.run(
        [*(prefix or []), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class LargeHeldAt:
    """`large`, but the worker computing element `at` holds it until `folder/release` exists,
    saying so in a file `folder/holding-<its pid>`."""

    def __init__(self, at: int, folder: Path) -> None:
        self.at, self.folder = at, folder

    def __call__(self, x: int) -> np.ndarray:
        if x == self.at and not (self.folder / "release").exists():
            (self.folder / f"holding-{os.getpid()}").touch()
            wait_for(str(self.folder / "release"))
        return large(x)


def holding_worker(folder: Path) -> int | None:
    """The pid of a live worker holding an element of `LargeHeldAt`, if any."""
    alive = {p.pid for p in workers()}
    held = {int(path.name.split("-")[1]) for path in folder.glob("holding-*")}
    return min(alive & held, default=None)


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_workers_killed_while_they_send_large_arrays_lose_nothing_and_leak_nothing(
    face: str, tmp_path: Path
) -> None:
    count = 40
    it = iter(two_workers(face, count, LargeHeldAt(30, tmp_path)))
    chooser = random.Random(7)
    stop = threading.Event()

    def kill_workers() -> None:
        try:
            for _ in range(6):  # kills at random moments, wherever the workers are
                if stop.wait(0.08):
                    return
                alive = workers()
                if alive:
                    os.kill(chooser.choice(alive).pid, signal.SIGKILL)
            # And one that lands for sure: the worker computing element 30, which the
            # consumer cannot have yet.
            holder: list[int] = []
            wait_until(
                lambda: holder.extend(filter(None, [holding_worker(tmp_path)])) or holder,
                "a worker held element 30",
            )
            os.kill(holder[0], signal.SIGKILL)
        finally:
            (tmp_path / "release").touch()

    killer = threading.Thread(target=kill_workers)
    killer.start()
    try:
        run = read_through(it, max_errors=50, catch=(WorkerError,))
    finally:
        stop.set()
        killer.join()
    assert run.errors, "no kill landed while reading"
    assert all("killed by signal 9" in str(error) for error in run.errors)
    assert_large(run.elements, count)
    states = reference_states(lambda: two_workers(face, count, large))
    for state, delivered in zip(run.states, run.delivered_at_error):
        assert payload(state) == payload(states[delivered])
    del run
    it.close()
    assert_nothing_left()


@pytest.mark.slow
@DEV_SHM
@pytest.mark.parametrize("face", FACES)
def test_a_whole_process_group_killed_leaves_no_memory_behind(face: str, tmp_path: Path) -> None:
    program = tmp_path / "group.py"
    program.write_text(
        script_for(
            face,
            """
            if __name__ == "__main__":
                for i, element in enumerate(make(10_000)):
                    if i == 3:
                        print("reading", flush=True)
            """,
        )
    )
    before = segments()
    files: set[tuple[int, int]] = set()  # the memory files the program's processes hold
    with subprocess.Popen(
        [sys.executable, str(program)], stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline().strip() == "reading"
            for _ in range(20):  # workers are writing blocks, the parent mapping them
                started = {process.pid, *in_session(process.pid), *descendants(process.pid)}
                files |= {file for pid in started for file in memory_file_ids(pid, MEMORY_FILE)}
                time.sleep(0.01)
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # a preempted container: all at once
            process.wait(timeout=30)
    wait_until(
        lambda: not in_session(process.pid) and not holders(files, MEMORY_FILE),
        "the killed program's workers exited and its memory files were freed",
    )
    assert in_session(process.pid) == []
    assert holders(files, MEMORY_FILE) == {}  # held by nobody: the kernel freed them
    assert segments() == before


def in_session(session: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == session:
                    found.append(int(entry))
            except ProcessLookupError:
                continue
    return found


@DEV_SHM
@pytest.mark.parametrize("face", FACES)
def test_names_squatted_in_dev_shm_by_another_user_change_nothing(face: str) -> None:
    nobody = 65534
    pid = os.getpid()
    squatted = [Path(f"/dev/shm/grainfn_{p}_{n}") for p in range(pid, pid + 300) for n in range(3)]
    squatted += [Path("/dev/shm/grainfn_block"), Path("/dev/shm/grainfn-block")]
    try:
        for path in squatted:
            path.write_bytes(b"not yours")
            os.chown(path, nobody, nobody)
            path.chmod(0o600)
        with iter(two_workers(face, 12, large)) as it:
            assert_large(list(it), 12)
        assert all(path.read_bytes() == b"not yours" for path in squatted)  # left alone
    finally:
        for path in squatted:
            path.unlink(missing_ok=True)
    assert_nothing_left()


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_a_forked_child_leaves_its_parents_workers_alone(face: str, tmp_path: Path) -> None:
    out = run_script(
        tmp_path,
        script_for(
            face,
            """
            import os, sys

            if __name__ == "__main__":
                it = iter(make(600))
                head = [int(next(it)[0]) for _ in range(10)]
                child = os.fork()
                if child == 0:
                    try:
                        for _ in it:  # past what the parent received: another process's workers
                            pass
                    except RuntimeError as error:
                        print("child:", error, flush=True)
                    sys.exit(0)  # a normal exit: atexit hooks and finalizers run
                os.waitpid(child, 0)
                rest = [int(e[0]) for e in it]
                print("parent:", head + rest == list(range(600)), flush=True)
            """,
        ),
    )
    assert "child: These worker processes belong to process" in out
    assert "parent: True" in out


@pytest.mark.parametrize("face", FACES)
def test_a_tiny_full_dev_shm_does_not_stop_large_elements(face: str, tmp_path: Path) -> None:
    # Docker gives containers 64 MiB of /dev/shm; here 1 MiB, already full, in
    # a mount namespace of its own, for 16 MiB elements.
    mount = "mount -t tmpfs -o size=1m tmpfs /dev/shm && head -c 1048576 /dev/zero > /dev/shm/full"
    out = run_script(
        tmp_path,
        script_for(
            face,
            """
            import os

            if __name__ == "__main__":
                shm = os.statvfs("/dev/shm")
                print("dev/shm free bytes:", shm.f_bavail * shm.f_frsize, flush=True)
                values = [int(e[0]) for e in make(10) if e.shape == (2 << 20,) and e[-1] == e[0]]
                print("values:", values, flush=True)
            """,
        ),
        prefix=["unshare", "--mount", "sh", "-c", f'{mount} && exec "$0" "$@"'],
    )
    assert "dev/shm free bytes: 0" in out
    assert f"values: {list(range(10))}" in out


def large_in_small_files(x: int) -> np.ndarray:
    """`large`, in a worker whose files may not pass 1 MiB: memory files that large fail (EFBIG)."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (MIB, MIB))
    return large(x)


def mapped_memory_files() -> int:
    with open("/proc/self/maps") as maps:
        return sum("memfd:grainfn-block" in line for line in maps)


@pytest.mark.slow
@pytest.mark.parametrize("face", FACES)
def test_a_refused_memory_file_sends_the_arrays_through_the_pipe(face: str) -> None:
    with iter(two_workers(face, 6, large_in_small_files)) as it:
        elements = list(it)
        assert mapped_memory_files() == 0  # in the pickles, not in memory files
    assert_large(elements, 6)
    elements[0][0] = -1.0  # writable all the same
    with iter(two_workers(face, 6, large)) as it:
        elements = list(it)
        assert mapped_memory_files() > 0  # without the limit, in memory files
    del elements  # their mappings hold the memory files
    assert_nothing_left()


def wait_for(path: str) -> None:
    wait_until(lambda: os.path.exists(path), f"{path} was created")


class HoldAt:
    """Holds element `at` until `path` exists."""

    def __init__(self, at: int, path: str) -> None:
        self.at, self.path = at, path

    def __call__(self, x: int) -> int:
        if x == self.at and not os.path.exists(self.path):
            Path(f"{self.path}.holding").touch()
            wait_for(self.path)
        return x


class NotMultipleOf3(grain.transforms.Filter):
    def filter(self, element: Any) -> bool:
        return int(element) % 3 != 0


def held(face: str, release: str, stream_stages: bool) -> Any:
    """200 numbers, number 40 held by its worker until `release` exists."""
    if face == "mp_prefetch":
        ds = grain.MapDataset.range(200).map(HoldAt(40, release)).to_iter_dataset()
        if stream_stages:
            ds = ds.filter(lambda x: x % 3 != 0).batch(2)
        return ds.mp_prefetch(TWO_WORKERS)
    operations: list[Any] = [MapOf(HoldAt(40, release))]
    if stream_stages:
        operations += [NotMultipleOf3(), grain.transforms.Batch(2)]
    return grain.DataLoader(
        data_source=list(range(200)),
        sampler=grain.SequentialSampler(200),
        operations=operations,
        worker_count=2,
        adaptive=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("stream_stages", [False, True])
@pytest.mark.parametrize("face", FACES)
def test_ctrl_c_while_waiting_for_a_worker_loses_nothing(
    face: str, stream_stages: bool, tmp_path: Path
) -> None:
    release = str(tmp_path / "release")
    Path(release).touch()
    expected = [np.asarray(e).tolist() for e in held(face, release, stream_stages)]
    Path(release).unlink()

    interrupted = threading.Event()

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        # Ctrl-C inside next(), as a user's would land; one that comes while the test
        # loop itself runs (between two next calls) is sent again.
        if not interrupted.is_set() and inside_a_call_from(frame, "read_through"):
            interrupted.set()
            raise KeyboardInterrupt

    def interrupt_then_release() -> None:
        try:  # a worker holds element 40 (its block cannot arrive), and the consumer waits
            wait_until(lambda: Path(f"{release}.holding").exists(), "a worker held element 40")
            while not interrupted.wait(0.05):
                os.kill(os.getpid(), signal.SIGINT)
        finally:
            Path(release).touch()

    it = iter(held(face, release, stream_stages))
    thread = threading.Thread(target=interrupt_then_release)
    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    thread.start()
    try:
        run = read_through(it, max_errors=3, catch=(KeyboardInterrupt,))
    finally:
        thread.join()
        signal.signal(signal.SIGINT, previous)
    assert len(run.errors) == 1
    assert [np.asarray(e).tolist() for e in run.elements] == expected
    it.close()
    assert_nothing_left()


@pytest.mark.parametrize("times", [1, None])
def test_an_exception_in_a_map_run_by_the_parent_is_retried(
    times: int | None, tmp_path: Path
) -> None:
    def make(fault: Any) -> Any:
        ds = grain.MapDataset.range(100).to_iter_dataset().map(fault).batch(3)
        return ds.mp_prefetch(TWO_WORKERS)

    expected = list(make(Fault(str(tmp_path), frozenset(), "raise", 0)))
    it = iter(make(Fault(str(tmp_path), frozenset({57}), "raise", times)))
    run = read_through(it, max_errors=3, catch=(FaultError,))
    if times == 1:
        assert len(run.errors) == 1
        assert_elements_equal(run.elements, expected)
    else:
        assert len(run.errors) == 3
        assert_elements_equal(run.elements, expected[: 57 // 3])
    it.close()
    assert_nothing_left()


def dead_pid() -> int:
    """The pid of a process that has ended."""
    code = "import os; print(os.getpid())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_segments_older_versions_left_are_swept_if_ours_and_their_process_is_gone(
    tmp_path: Path,
) -> None:
    gone, alive = dead_pid(), os.getpid()
    files = {
        f"grainfn_{gone}_0": os.getuid(),  # ours, its process gone: swept
        f"grainfn_{gone}_1": 65534,  # another user's: left
        f"grainfn_{alive}_0": os.getuid(),  # a live process's: left
        f"grainfn_{gone}_x": os.getuid(),  # not a segment name: left
        "other_123_4": os.getuid(),  # not grainfn's: left
    }
    for name, owner in files.items():
        (tmp_path / name).write_bytes(b"segment")
        os.chown(tmp_path / name, owner, owner)
    assert sweep_dead_segments(str(tmp_path)) == [f"grainfn_{gone}_0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(files) - {f"grainfn_{gone}_0"})


@DEV_SHM
def test_a_new_process_sweeps_dev_shm_when_its_first_pool_starts(tmp_path: Path) -> None:
    gone = dead_pid()
    left = Path(f"/dev/shm/grainfn_{gone}_0")
    left.write_bytes(b"left by a killed grainfn 0.1 process")
    try:
        run_script(
            tmp_path,
            """
            import grainfn as grain
            if __name__ == "__main__":
                ds = grain.MapDataset.range(4).to_iter_dataset()
                options = grain.MultiprocessingOptions(num_workers=1)
                assert list(ds.mp_prefetch(options)) == [0, 1, 2, 3]
            """,
        )
        assert not left.exists()
    finally:
        left.unlink(missing_ok=True)
