"""Worker processes: output and states independent of the worker count; faults surface; no leaks."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.core.blocks import BlockReader
from grainfn._src.parallel.cores import available_cores
from grainfn._src.parallel.processes import LeafExecutor, WorkerError, WorkerPool
from grainfn._src.parallel.transfer import INLINE_BYTES, decode_block, encode_block
from grainfn.testing import assert_elements_equal

from support.leaks import DEV_SHM, assert_nothing_left, open_memory_files, segments, workers
from support.pipelines import build_stream, stream_specs
from support.reading import read_reader
from support.waiting import no_hang, wait_until


def read(stream: Any, state: Any = None, limit: int = 80) -> list[Any]:
    it = fn.iterate(stream, state)
    try:
        return list(itertools.islice(it, limit))
    finally:
        it.close()


@settings(max_examples=12, deadline=None)
@given(stream_specs(), st.integers(1, 4), st.integers(0, 3), st.integers(0, 30))
def test_output_and_states_do_not_depend_on_the_worker_count(
    spec: tuple[Any, ...], workers_first: int, workers_then: int, cut: int
) -> None:
    note(f"spec = {spec!r}")
    try:
        expected = read(build_stream(spec))
    except (ValueError, TypeError):
        return
    stream = fn.mp_prefetch(workers_first, build_stream(spec))
    it = fn.iterate(stream)
    head = list(itertools.islice(it, min(cut, len(expected))))
    saved = json.loads(json.dumps(fn.state_to_dict(stream, it.state)))
    it.close()
    resumed_stream = fn.mp_prefetch(workers_then, build_stream(spec))
    state = fn.state_from_dict(resumed_stream, saved)
    tail = read(resumed_stream, state, limit=len(expected) - len(head))
    for k, (ours, theirs) in enumerate(zip(head + tail, expected, strict=True)):
        assert_elements_equal(ours, theirs, f"element {k}")
    assert_nothing_left()


def heavy(x: int) -> dict[str, Any]:
    return {"image": np.full((8, 8, 3), x % 256, np.uint8), "label": x % 10}


@pytest.mark.parametrize("num_workers", [0, 1, 2, 5, 8])
def test_grain_pipelines_give_the_same_batches_for_0_to_8_workers(num_workers: int) -> None:
    def build() -> Any:
        a = grain.MapDataset.range(300).seed(4).shuffle().map(heavy)
        a = a.random_map(lambda e, rng: {**e, "label": e["label"] + int(rng.integers(3))})
        b = grain.MapDataset.range(1000, 1100).map(heavy).batch(1).map(lambda b: {**b})
        left = a.filter(lambda e: e["label"] % 4 != 0).to_iter_dataset()
        right = b.to_iter_dataset().map(lambda e: {k: v[0] for k, v in e.items()})
        return grain.IterDataset.mix([left, right], [3, 1]).batch(16)

    expected = list(build())
    options = grain.MultiprocessingOptions(num_workers=num_workers, per_worker_buffer_size=2)
    with iter(build().mp_prefetch(options)) as it:
        got = list(it)
    assert len(got) == len(expected) > 10
    for k, (ours, theirs) in enumerate(zip(got, expected)):
        assert_elements_equal(ours, theirs, f"batch {k}")
    assert_nothing_left()


def test_arrays_cross_in_a_memory_file_and_come_back_writable() -> None:
    large = np.arange(INLINE_BYTES // 8, dtype=np.float64).reshape(-1, 8)
    block = [{"x": large, "y": [np.ones(INLINE_BYTES, np.uint8)]}, 7, "text"]
    encoded = encode_block(block)
    assert encoded.descriptor is not None and open_memory_files() == 1
    assert encoded.sizes == [INLINE_BYTES, INLINE_BYTES]
    assert len(encoded.data) < 400  # the arrays are not in the pickle
    descriptor = encoded.descriptor
    back = decode_block(encoded.data, descriptor, encoded.sizes)
    assert_elements_equal(back, block)
    with pytest.raises(OSError):
        os.fstat(descriptor)  # decode_block closed it; the arrays keep the mapping
    back[0]["x"][0, 0] = 100.0  # writable
    assert back[0]["x"][0, 0] == 100.0
    del back
    assert open_memory_files() == 0  # the memory went with the last array
    assert encode_block([1, 2]).descriptor is None


def test_without_memory_files_arrays_travel_inside_the_pickle() -> None:
    block = [{"x": np.arange(INLINE_BYTES, dtype=np.float64)}, 7]
    encoded = encode_block(block, memory_files=False)
    assert encoded.descriptor is None and encoded.sizes == []
    assert len(encoded.data) > 8 * INLINE_BYTES
    back = decode_block(encoded.data, None, [])
    assert_elements_equal(back, block)
    back[0]["x"][0] = 100.0
    assert back[0]["x"][0] == 100.0


def test_small_arrays_travel_inside_the_pickle_and_come_back_writable() -> None:
    block = [{"x": np.arange(12.0).reshape(3, 4)}, np.ones(INLINE_BYTES - 1, np.uint8)]
    encoded = encode_block(block)
    assert encoded.descriptor is None and encoded.sizes == []
    back = decode_block(encoded.data, encoded.descriptor, encoded.sizes)
    assert_elements_equal(back, block)
    back[0]["x"][0, 0] = 100.0
    assert back[0]["x"][0, 0] == 100.0


class BoomError(Exception):
    pass


def explode_at_7(x: int) -> int:
    if x == 7:
        raise BoomError(f"element {x} is broken")
    return x


def test_a_worker_exception_is_raised_in_the_parent_with_its_traceback() -> None:
    stream = fn.mp_prefetch(2, fn.from_dataset(fn.map(explode_at_7, fn.range(20))), adaptive=False)
    it = fn.iterate(stream)
    assert list(itertools.islice(it, 7)) == list(range(7))
    with pytest.raises(BoomError, match="element 7 is broken") as caught:
        next(it)
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "Raised in grainfn worker" in notes
    assert "explode_at_7" in notes
    assert it.state == fn.DatasetPosition(7)
    it.close()
    assert_nothing_left()


def test_a_killed_worker_is_an_error_within_seconds() -> None:
    def slow(x: int) -> int:
        time.sleep(0.05)
        return x

    stream = fn.mp_prefetch(2, fn.from_dataset(fn.map(slow, fn.range(10_000))), adaptive=False)
    it = fn.iterate(stream)
    next(it)
    victim = workers()[0]
    os.kill(victim.pid, signal.SIGKILL)
    with no_hang("the error of a killed worker"), pytest.raises(WorkerError, match="signal 9"):
        for _ in range(10_000):
            next(it)
    it.close()
    assert_nothing_left()


def test_close_with_gc_and_errors_leave_nothing_behind() -> None:
    ds = grain.MapDataset.range(2000).map(heavy).to_iter_dataset()
    options = grain.MultiprocessingOptions(num_workers=2)
    it = iter(ds.mp_prefetch(options))
    next(it)
    it.close()
    assert_nothing_left()
    with pytest.raises(ValueError, match="iterator is closed"):
        next(it)
    with iter(ds.mp_prefetch(options)) as it:
        next(it)
    assert_nothing_left()
    it = iter(ds.mp_prefetch(options))
    next(it)
    del it
    assert_nothing_left()
    with pytest.raises(ZeroDivisionError):
        for element in ds.mp_prefetch(options):
            if element["label"] == 3:
                _ = 1 / 0
    assert_nothing_left()


@DEV_SHM
def test_ctrl_c_in_the_consuming_loop_leaves_nothing_behind(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys
            import numpy as np
            import grainfn as grain

            if __name__ == "__main__":
                # Ctrl-C raises KeyboardInterrupt even where this test runs with SIGINT
                # ignored (a job started in the background inherits that).
                signal.signal(signal.SIGINT, signal.default_int_handler)
                ds = grain.MapDataset.range(10_000).map(lambda x: np.zeros(1000) + x)
                ds = ds.to_iter_dataset().mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
                print("workers started", flush=True)
                try:
                    for i, element in enumerate(ds):
                        if i == 50:
                            os.kill(os.getpid(), signal.SIGINT)
                except KeyboardInterrupt:
                    print("interrupted", flush=True)
                    raise
            """
        )
    )
    before = segments()
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert "interrupted" in done.stdout, done.stderr
    assert "KeyboardInterrupt" in done.stderr
    assert segments() == before
    leftover = subprocess.run(
        ["pgrep", "-f", str(script)], capture_output=True, text=True, check=False
    )
    assert leftover.stdout.strip() == ""


def test_worker_init_fn_runs_in_each_worker(tmp_path: Path) -> None:
    def init(index: int, count: int) -> None:
        (tmp_path / f"worker-{index}-of-{count}").write_text(str(os.getpid()))

    stream = fn.mp_prefetch(3, fn.from_dataset(fn.range(30)), worker_init_fn=init)
    assert read(stream) == list(range(30))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "worker-0-of-3",
        "worker-1-of-3",
        "worker-2-of-3",
    ]
    assert_nothing_left()


def test_a_failing_worker_start_is_a_clear_error() -> None:
    def init(index: int, count: int) -> None:
        raise RuntimeError(f"no GPU for worker {index}")

    stream = fn.mp_prefetch(1, fn.from_dataset(fn.range(5)), worker_init_fn=init)
    with pytest.raises(RuntimeError, match="no GPU for worker 0") as caught:
        read(stream)
    assert "starting grainfn worker 0" in "\n".join(caught.value.__notes__)
    assert_nothing_left()


class HoldsALock:
    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> int:
        return index


def test_a_pipeline_that_does_not_pickle_is_a_clear_error() -> None:
    stream = fn.mp_prefetch(2, fn.from_dataset(fn.source(HoldsALock())))
    with pytest.raises(TypeError, match=r"cannot pickle '_thread.lock'") as caught:
        read(stream)
    assert "need the pipeline pickled" in "\n".join(caught.value.__notes__)
    assert_nothing_left()


class RefusesPickling:
    def __getstate__(self) -> None:
        raise ValueError("I shall not be pickled")

    def __call__(self, x: int) -> int:
        return x


def test_the_picklers_own_error_comes_through_as_in_grain() -> None:
    stream = fn.mp_prefetch(2, fn.from_dataset(fn.map(RefusesPickling(), fn.range(4))))
    with pytest.raises(ValueError, match="I shall not be pickled") as caught:
        read(stream)
    assert "need the pipeline pickled" in "\n".join(caught.value.__notes__)
    assert_nothing_left()


def test_start_prefetch_starts_the_workers_in_the_background() -> None:
    it = iter(
        grain.MapDataset.range(100)
        .to_iter_dataset()
        .mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    )
    it.start_prefetch()  # in the background: no element asked for, yet they start
    wait_until(lambda: len(workers()) == 2, "both workers started")
    assert list(it) == list(range(100))
    it.close()
    assert_nothing_left()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="num_workers must be an integer >= 0, got -1"):
        fn.mp_prefetch(-1, fn.from_dataset(fn.range(3)))
    with pytest.raises(ValueError, match="per_worker_buffer_size must be a positive integer"):
        grain.MultiprocessingOptions(num_workers=1, per_worker_buffer_size=0)
    with pytest.raises(TypeError, match="worker_init_fn must be callable"):
        fn.mp_prefetch(1, fn.from_dataset(fn.range(3)), worker_init_fn=3)  # type: ignore[arg-type]


def test_workers_start_safely_after_jax_started_its_threads(tmp_path: Path) -> None:
    script = tmp_path / "with_jax.py"
    script.write_text(
        textwrap.dedent(
            """
            import jax.numpy as jnp
            import grainfn as grain

            if __name__ == "__main__":
                total = int(jnp.arange(10).sum())  # JAX is running its threads now
                ds = grain.MapDataset.range(200).map(lambda x: x * 2).to_iter_dataset()
                ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
                print(total, sum(ds))
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["45", str(sum(range(0, 400, 2)))]


def test_workers_start_with_their_first_block_so_a_tiny_dataset_starts_few() -> None:
    ds = grain.MapDataset.range(4).map(lambda x: x * 10).to_iter_dataset()
    with iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2000))) as it:
        assert list(it) == [0, 10, 20, 30]
        started = len(it.core._cursor.pool.workers)  # type: ignore[attr-defined]
    assert started <= 4  # one per position at most, not 2000 (the parent may read them all)
    assert_nothing_left()


class WaitsInWorkers:
    """`x -> (x, pid)`; in a worker process, only once the file `gate` exists.

    In the parent it first creates `read_here`, which says the parent read
    an element itself.
    """

    def __init__(self, parent: int, gate: str, read_here: str) -> None:
        self.parent, self.gate, self.read_here = parent, gate, read_here

    def __call__(self, x: int) -> tuple[int, int]:
        if os.getpid() == self.parent:
            Path(self.read_here).touch()
        else:
            wait_until(lambda: os.path.exists(self.gate), "the test opened the gate")
        return x, os.getpid()


def test_a_pools_done_says_whether_a_block_came_without_waiting(tmp_path: Path) -> None:
    gate, read_here = tmp_path / "gate", tmp_path / "read here"
    waits = fn.map(WaitsInWorkers(os.getpid(), str(gate), str(read_here)), fn.range(10))
    pool = WorkerPool([waits], 1)
    try:
        task = pool.submit(0, 0, 4)
        with no_hang("done() while the worker waits"):
            assert not task.done() and not task.done()
        gate.touch()
        wait_until(task.done, "the block came")
        block, error, _ = task.result()
        assert error is None and [x for x, _ in block] == [0, 1, 2, 3]
    finally:
        pool.close()
    assert_nothing_left()


def test_the_consumer_reads_blocks_itself_while_the_workers_keep_it_waiting(
    tmp_path: Path,
) -> None:
    gate, read_here = tmp_path / "gate", tmp_path / "read here"
    waits = fn.map(WaitsInWorkers(os.getpid(), str(gate), str(read_here)), fn.range(3_000))
    pool = WorkerPool([waits], 2)
    wait_until(pool.ready, "the workers started")
    executor = LeafExecutor(pool, 0)
    assert executor.consumer_helps == (available_cores() > 2)
    executor.consumer_helps = True  # as with a core to spare, whatever this machine has
    reader = BlockReader(waits, 0, executor=executor, buffer=None)
    reader.start_prefetch()  # every block to the workers, from the first: they wait for the gate
    opener = threading.Thread(
        target=lambda: (wait_until(read_here.exists, "a read here"), gate.touch())
    )
    opener.start()
    try:
        got = read_reader(reader)
    finally:
        gate.touch()
        opener.join()
        reader.close()
        pool.close()
    assert [x for x, _ in got] == list(range(3_000))
    pids = {pid for _, pid in got}
    assert os.getpid() in pids and len(pids) > 1  # the consumer read some, the workers the rest
    assert_nothing_left()
