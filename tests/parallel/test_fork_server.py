"""Tests for grainfn._src.parallel.fork_server: workers never run the user's main module (issue 31).

Each script here records every run of its module-level code in a marker file
and would fail if that code ran twice (it binds a fixed TCP port and holds it,
as `jax.distributed.initialize()` holds its coordinator's). The scripts run in
real processes, as `python script.py` and as `python -m package.module`, and
use functions and classes they define in the workers.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import socket
import subprocess
import sys
import types
from multiprocessing import forkserver, spawn
from pathlib import Path
from types import SimpleNamespace

import pytest

from grainfn import fn
from grainfn._src.parallel import fork_server
from grainfn._src.parallel.fork_server import PRELOAD, preparation_data, start_context

from support.leaks import assert_nothing_left

# Module-level code with side effects: it appends a line to the marker file and
# binds the port given as the first argument (a second run, anywhere, fails).
PROLOGUE = """
import os, socket, sys
with open(os.environ["MARKER"], "a") as marker:
    marker.write(f"{__name__} {os.getpid()}\\n")
coordinator = socket.socket()
coordinator.bind(("127.0.0.1", int(sys.argv[1])))
coordinator.listen()
"""

# What runs in workers: a lambda, a closure, a nested function and classes of
# the script (also as the elements the workers send back), each compared with
# the same pipeline read without workers.
PIPELINES = """
import dataclasses, enum, functools, json
import numpy as np
import grainfn as grain
from grainfn import fn

OFFSET = 7


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


def to_point(x):
    return Point(x, x * x + OFFSET)


def make_scaler(factor):
    def scale(point):  # a closure over `factor`
        return dataclasses.replace(point, y=point.y * factor)

    return scale


class Double(grain.transforms.Map):
    def map(self, element):
        def twice(v):  # a nested function
            return 2 * v

        return {"x": twice(element), "colour": Colour.RED if element % 2 else Colour.BLUE}


def run():
    points = fn.map(make_scaler(3), fn.map(to_point, fn.range(40)))
    tagged = fn.map(lambda p: (p, functools.partial(to_point, p.x)), points)

    def read_fn(workers):
        if workers == 0:
            stream = fn.from_dataset(tagged)
        else:
            stream = fn.mp_prefetch(workers, fn.from_dataset(tagged))
        return [(p, make()) for p, make in fn.iterate(stream)]

    def read_loader(workers):
        loader = grain.DataLoader(
            data_source=list(range(30)),
            sampler=grain.IndexSampler(30, shuffle=True, num_epochs=1, seed=0),
            operations=[Double(), grain.transforms.Batch(4)],
            worker_count=workers,
        )
        return [(b["x"].tolist(), [c.name for c in b["colour"]]) for b in loader]

    def read_facade(workers):
        ds = grain.MapDataset.range(25).map(lambda x: to_point(x)).to_iter_dataset()
        if workers:
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
        return list(ds)

    results = {}
    for name, read in [("fn", read_fn), ("loader", read_loader), ("facade", read_facade)]:
        with_workers, without = read(2), read(0)
        results[name] = with_workers == without and len(without) > 0
    results["classes"] = type(read_facade(2)[0]) is Point
    print(json.dumps(results), flush=True)
"""

GUARDED = PROLOGUE + PIPELINES + '\n\nif __name__ == "__main__":\n    run()\n'

UNGUARDED = PROLOGUE + PIPELINES + "\n\nrun()  # no `if __name__ == '__main__':` guard\n"

SPAWNED = (
    PROLOGUE
    + """
import json
from grainfn import fn
from grainfn._src.parallel.processes import WorkerPool


class Box:
    def __init__(self, value):
        self.value = value


if __name__ == "__main__":
    pool = WorkerPool([fn.map(lambda x: Box(x * 10), fn.range(6))], 2, start_method="spawn")
    try:
        blocks = [pool.submit(0, first, first + 3).result() for first in (0, 3)]
    finally:
        pool.close()
    values = [box.value for block, error, _ in blocks for box in block]
    print(json.dumps({"spawn": values == [x * 10 for x in range(6)], "errors": [
        repr(error) for _, error, _ in blocks if error is not None
    ]}), flush=True)
"""
)

EVERYTHING = {"fn": True, "loader": True, "facade": True, "classes": True}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_script(tmp_path: Path, source: str, as_module: bool = False) -> tuple[dict, list[str]]:
    """Runs `source` as a script (or with -m from a package); its JSON line and the marker."""
    marker = tmp_path / "marker"
    env = {**os.environ, "MARKER": str(marker)}
    if as_module:
        package = tmp_path / "packages" / "job"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "train.py").write_text(source)
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "packages"), env.get("PYTHONPATH", "")])
        command = [sys.executable, "-m", "job.train"]
    else:
        script = tmp_path / "train.py"
        script.write_text(source)
        command = [sys.executable, str(script)]
    done = subprocess.run(
        [*command, str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = marker.read_text().splitlines()
    return json.loads(done.stdout.strip().splitlines()[-1]), lines


@pytest.mark.parametrize("as_module", [False, True], ids=["script", "python -m"])
def test_workers_do_not_run_the_main_module(tmp_path: Path, as_module: bool) -> None:
    results, marker = run_script(tmp_path, GUARDED, as_module)
    assert results == EVERYTHING
    assert len(marker) == 1, marker  # the parent's own run, nothing else
    assert marker[0].startswith("__main__ ")


def test_a_script_without_the_main_guard_works_and_does_not_recurse(tmp_path: Path) -> None:
    results, marker = run_script(tmp_path, UNGUARDED)
    assert results == EVERYTHING
    assert len(marker) == 1, marker


def test_spawned_workers_do_not_run_the_main_module_either(tmp_path: Path) -> None:
    results, marker = run_script(tmp_path, SPAWNED)
    assert results == {"spawn": True, "errors": []}
    assert len(marker) == 1, marker


BY_NAME = (
    PROLOGUE
    + """
import json
from grainfn import fn


class Sentinel:
    def __reduce__(self):
        return "SENTINEL"  # pickled as the name __main__.SENTINEL


SENTINEL = Sentinel()


def keep(x, sentinel=SENTINEL):
    return x


if __name__ == "__main__":
    it = fn.iterate(fn.mp_prefetch(1, fn.from_dataset(fn.map(keep, fn.range(3))), adaptive=False))
    try:
        list(it)
    except AttributeError as error:
        print(json.dumps({"error": str(error), "notes": error.__notes__}), flush=True)
    finally:
        it.close()
"""
)


def test_what_pickles_by_name_from_the_main_script_is_refused_clearly(tmp_path: Path) -> None:
    results, marker = run_script(tmp_path, BY_NAME)
    assert "Can't get attribute 'SENTINEL'" in results["error"]
    assert "workers do not run the main script" in results["notes"][0]
    assert "define it in a module that workers can import" in results["notes"][0]
    assert len(marker) == 1, marker


def read_main_config(x: int) -> int:
    return x + int(sys.modules["__main__"].GRAINFN_TEST_CONFIG)


def test_a_name_of_the_main_module_the_pipeline_does_not_bring_is_a_clear_error() -> None:
    stream = fn.mp_prefetch(
        1, fn.from_dataset(fn.map(read_main_config, fn.range(3))), adaptive=False
    )
    it = fn.iterate(stream)
    with pytest.raises(AttributeError, match="GRAINFN_TEST_CONFIG") as caught:
        list(it)
    it.close()
    message = str(caught.value)
    assert "does not run the main script" in message
    assert "define it in a module that workers can import" in message
    assert_nothing_left()


def test_preparation_data_leaves_the_main_module_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # A main script, as `python train.py` has (pytest's own main may be a `-c` string).
    script = types.ModuleType("__main__")
    script.__file__ = __file__
    monkeypatch.setitem(sys.modules, "__main__", script)
    data = preparation_data("grainfn-worker-3")
    stock = spawn.get_preparation_data("grainfn-worker-3")
    assert any(key.startswith("init_main_") for key in stock)  # what multiprocessing sends
    assert {key: value for key, value in stock.items() if not key.startswith("init_main_")} == data


def test_other_multiprocessing_users_see_no_change() -> None:
    preload = list(forkserver._forkserver._preload_modules)  # type: ignore[attr-defined]
    method = multiprocessing.get_start_method(allow_none=True)
    get_preparation_data = spawn.get_preparation_data
    it = fn.iterate(fn.mp_prefetch(2, fn.from_dataset(fn.range(10))))
    assert list(it) == list(range(10))
    it.close()
    assert list(forkserver._forkserver._preload_modules) == preload  # type: ignore[attr-defined]
    assert multiprocessing.get_start_method(allow_none=True) == method
    assert spawn.get_preparation_data is get_preparation_data
    assert "__main__" not in PRELOAD
    assert_nothing_left()


def test_start_methods_are_checked() -> None:
    assert start_context("spawn").Process.__name__ == "SpawnWorkerProcess"
    with pytest.raises(ValueError, match=r"Unknown start method for grainfn workers: 'fork'"):
        start_context("fork")


def test_warm_is_true_for_spawn_and_for_a_fork_server_that_forked_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert fork_server.warm("spawn")
    monkeypatch.setattr(fork_server._SERVER, "forked", 0)
    assert not fork_server.warm("forkserver")
    monkeypatch.setattr(fork_server._SERVER, "forked", os.getpid())
    assert fork_server.warm("forkserver")


def test_each_process_gets_a_fork_server_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    server = fork_server._Server()
    first = server.get()
    assert server.get() is first  # made once in this process
    assert first._preload_modules == list(PRELOAD)  # type: ignore[attr-defined]
    monkeypatch.setattr(server, "owner", os.getpid() + 1)  # as in a child of os.fork()
    assert server.get() is not first


def test_the_launch_data_is_the_preparation_data_then_the_process() -> None:
    process = start_context("spawn").Process(target=print, name="grainfn-worker-7")
    popen = SimpleNamespace(duplicate_for_child=lambda fd: fd)  # lets the authkey pickle
    data = fork_server._launch_data(popen, process)
    data.seek(0)
    prepared = pickle.load(data)
    assert prepared == preparation_data("grainfn-worker-7")
    assert pickle.load(data).name == "grainfn-worker-7"


def numpy_random_was_imported(x: int) -> bool:
    return "numpy.random" in sys.modules


def test_workers_start_with_numpy_random_imported_by_the_server() -> None:
    # Nothing in this pipeline loads numpy.random: a worker has it from the fork server.
    stream = fn.from_dataset(fn.map(numpy_random_was_imported, fn.range(2)))
    it = fn.iterate(fn.mp_prefetch(1, stream, adaptive=False))
    try:
        assert list(it) == [True, True]
    finally:
        it.close()
    assert_nothing_left()
