"""Faults of fn.ray_prefetch and RayPool, on a real local Ray cluster (2 nodes, 1 CPU each).

A record that kills every actor that reads it, actors Ray cannot place, a
block with no answer within `worker_timeout`, and two pools on the Ray one
of them started: each ends in an error that names what happened and what to
do, or in nothing at all; never in a hang, and never in a hole in the data.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from grainfn import fn
from grainfn._src.parallel.processes import WorkerError
from grainfn._src.parallel.ray_prefetch import RayPrefetchedStream
from grainfn.fn import PlacementError, RayPool

# The actors import this module for its maps, where `support` is not on the path: the
# functions that wait import support.waiting themselves (the actors never call them).

# JAX warns at every fork once its threads run; Ray starts its processes by fork and exec.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def state_after(stream: Any, count: int) -> Any:
    """The state of `stream` read in this process after `count` elements."""
    iterator = fn.iterate(stream)
    for _ in range(count):
        next(iterator)
    return iterator.state


def read_guarded(iterator: Any, pool: RayPool) -> tuple[list[Any], BaseException | None]:
    """The elements `iterator` gives until it ends or raises, and what it raised.

    Read in a thread, with a hang guard: the test fails if the read goes on
    past a generous bound, or while the pool replaces actor after actor.
    """
    from support.waiting import wait_until

    got: list[Any] = []
    raised: list[BaseException] = []

    def read() -> None:
        try:
            for element in iterator:
                got.append(element)
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=read, name="ray-faults-read", daemon=True)
    thread.start()
    wait_until(lambda: not thread.is_alive() or pool.replaced > 12, "the read ended")
    assert not thread.is_alive(), f"{pool.replaced} actors replaced, and the read goes on"
    return got, raised[0] if raised else None


def took_a_ticket(folder: str, name: str, times: int) -> bool:
    """Whether this call took one of `times` tickets (files `name-0`, ...): False once all are."""
    for ticket in range(times):
        try:
            os.close(os.open(os.path.join(folder, f"{name}-{ticket}"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        return True
    return False


def exits_at(position: int, times: int | None, folder: str) -> Callable[[int], int]:
    """A map whose process exits (os._exit) reading `position`: the first `times` reads, or all."""

    def exits(x: int) -> int:
        if x == position and (times is None or took_a_ticket(folder, "death", times)):
            os._exit(1)
        return x

    return exits


@pytest.mark.slow
def test_a_record_that_kills_every_actor_ends_in_a_worker_error_naming_it(
    cluster: Cluster, tmp_path: Any
) -> None:
    stream = fn.from_dataset(fn.map(exits_at(7, None, str(tmp_path)), fn.range(20)))
    pool = RayPool(2, num_cpus=0.25)
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
        got, raised = read_guarded(iterator, pool)
        assert got == list(range(7)), raised
        assert isinstance(raised, WorkerError), raised
        message = str(raised)
        assert "Reading position 7 kills Ray actors" in message, message
        assert "two in a row died at position 7" in message and "os._exit" in message
        assert iterator.state == state_after(fn.from_dataset(fn.range(20)), 7)  # before 7
        assert 3 <= pool.replaced <= 4  # the block's, then two at position 7
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.parametrize("deaths", [1, 2])
def test_a_position_that_killed_fewer_than_two_actors_in_a_row_costs_nothing(
    cluster: Cluster, tmp_path: Any, deaths: int
) -> None:
    # 1: the block's actor dies, and the one-at-a-time read gets through.
    # 2: an actor dies at position 7 in the one-at-a-time read too: 7 is a suspect, read again.
    stream = fn.from_dataset(fn.map(exits_at(7, deaths, str(tmp_path)), fn.range(20)))
    pool = RayPool(2, num_cpus=0.25)
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
        got, raised = read_guarded(iterator, pool)
        assert raised is None and got == list(range(20)), raised
        assert sorted(os.listdir(tmp_path)) == [f"death-{i}" for i in range(deaths)]
        assert pool.replaced >= deaths
    finally:
        pool.close()


def test_actors_no_node_could_hold_are_refused_at_once(cluster: Cluster) -> None:
    cases = [
        ({"num_cpus": 2}, "asks for CPU 2"),
        ({"num_cpus": 0.25, "resources": {"tpu_slice": 1}}, "tpu_slice 1"),
        ({"num_cpus": 0.25, "label_selector": {"role": "preprocessing"}}, "role=preprocessing"),
    ]
    for options, named in cases:
        pool = RayPool(2, **options)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="No node of the Ray cluster can hold") as raised:
            pool.start()
        message = str(raised.value)
        assert named in message and "(CPU 1" in message, message  # what the nodes have
        assert "add a node that has it" in message
        assert pool.slots == [] and ray.is_initialized()  # nothing started; the user's Ray lives
        iterator = fn.iterate(fn.ray_prefetch(pool, fn.from_dataset(fn.range(5)), adaptive=False))
        with pytest.raises(ValueError, match="No node of the Ray cluster can hold"):
            next(iterator)
        iterator.close()
        pool.close()


def cpus(which: Callable[[], dict[str, float]]) -> float:
    return float(which().get("CPU", 0.0))


@pytest.mark.slow
def test_more_actors_than_the_cluster_holds_end_in_a_placement_error(cluster: Cluster) -> None:
    from support.waiting import wait_until

    free = cpus(ray.available_resources)
    count = int(cpus(ray.cluster_resources)) + 1  # one CPU each: one more than the nodes hold
    pool = RayPool(count, num_cpus=1, placement_timeout=3)
    with pytest.raises(PlacementError) as raised:
        pool.start()
    message = str(raised.value)
    assert f" of {count} actors within placement_timeout=3 s" in message, message
    assert "each asks for CPU 1" in message and "available of" in message
    assert "raise placement_timeout" in message and "The pool did not start" in message
    assert pool.slots == []
    # The actors that started were stopped too: their CPUs come back.
    wait_until(lambda: cpus(ray.available_resources) >= free, "the pool's CPUs came back")
    pool.close()


@pytest.mark.slow
def test_resize_past_the_cluster_keeps_the_actors_that_started(cluster: Cluster) -> None:
    stream = fn.from_dataset(fn.range(30))
    pool = RayPool(1, num_cpus=1, placement_timeout=3)
    try:
        assert list(fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))) == list(range(30))
        new = int(cpus(ray.cluster_resources))  # with the one running: one more than fit
        with pytest.raises(PlacementError, match=f" of {new} actors within placement_timeout"):
            pool.resize(1 + new)
        assert 1 <= pool.num_actors == len(pool.slots) <= new
        assert list(fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))) == list(range(30))
    finally:
        pool.close()


def test_a_placement_timeout_must_be_a_positive_number_or_none() -> None:
    with pytest.raises(ValueError, match=r"placement_timeout must be None \(wait forever\) or a"):
        RayPool(1, placement_timeout=0)
    with pytest.raises(TypeError, match="placement_timeout must be"):
        RayPool(1, placement_timeout="60")  # type: ignore[arg-type]
    assert RayPool(1, placement_timeout=None).placement_timeout is None


def sleeps_once(position: int, folder: str, times: int = 1) -> Callable[[int], int]:
    """A map that sleeps 30 s at `position`, the first `times` times it is read there."""

    def sleeps(x: int) -> int:
        time.sleep(0.002)
        if x == position and took_a_ticket(folder, "slept", times):
            time.sleep(30)
        return x

    return sleeps


@pytest.mark.slow
def test_a_block_with_no_answer_within_worker_timeout_is_an_error_then_read_again(
    cluster: Cluster, tmp_path: Any
) -> None:
    n = 60
    stream = fn.from_dataset(fn.map(sleeps_once(23, str(tmp_path)), fn.range(n)))
    pool = RayPool(1, num_cpus=0.25)
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, worker_timeout=2))
        got: list[int] = []
        with pytest.raises(WorkerError, match=r"worker_timeout=2\)") as raised:
            for element in iterator:
                got.append(element)
        message = str(raised.value)
        assert "Ray actor 0" in message and "was killed after sending nothing for 2 s" in message
        assert "Nothing was lost" in message and "raise worker_timeout" in message
        assert iterator.state == state_after(fn.from_dataset(fn.range(n)), len(got))
        got += list(iterator)
        assert got == list(range(n))  # every element exactly once
        assert os.listdir(tmp_path) == ["slept-0"] and pool.replaced >= 1
    finally:
        pool.close()


@pytest.mark.slow
def test_a_timeout_kills_both_actors_of_a_slow_block_read_twice(
    cluster: Cluster, tmp_path: Any
) -> None:
    n = 800  # enough blocks before position 600 to know the median block time
    stream = fn.from_dataset(fn.map(sleeps_once(600, str(tmp_path), times=2), fn.range(n)))
    pool = RayPool(2, num_cpus=0.25)
    try:
        # A block is sent again after 4 times the median block time (0.5 s at least): long
        # before the timeout, however busy the machine.
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, worker_timeout=10))
        got: list[int] = []
        with pytest.raises(WorkerError, match="was killed after sending nothing") as raised:
            for element in iterator:
                got.append(element)
        assert "a second copy" in str(raised.value)  # the block was on two actors
        assert pool.duplicated >= 1 and pool.replaced >= 2
        got += list(iterator)
        assert got == list(range(n))
        assert sorted(os.listdir(tmp_path)) == ["slept-0", "slept-1"]
    finally:
        pool.close()


def test_the_data_loader_and_the_facade_pass_worker_timeout_on(cluster: Cluster) -> None:
    import grainfn as grain

    pool = RayPool(1, num_cpus=0.25)
    try:
        loader = grain.DataLoader(
            data_source=list(range(40)),
            sampler=grain.samplers.IndexSampler(40, num_epochs=1),
            operations=[grain.transforms.Batch(5)],
            worker_timeout=7,
            ray_pool=pool,
        )
        stream = loader.stream()
        assert isinstance(stream, RayPrefetchedStream) and stream.worker_timeout == 7.0
        assert [b.tolist() for b in loader] == [list(range(i, i + 5)) for i in range(0, 40, 5)]
        dataset = grain.MapDataset.range(10).to_iter_dataset()
        core = dataset.ray_prefetch(pool, worker_timeout=5).core
        assert isinstance(core, RayPrefetchedStream) and core.worker_timeout == 5.0
        assert list(dataset.ray_prefetch(pool, worker_timeout=5)) == list(range(10))
        with pytest.raises(ValueError, match=r"worker_timeout must be None \(wait forever\)"):
            dataset.ray_prefetch(pool, worker_timeout=-1)
    finally:
        pool.close()


TWO_POOLS = """
import gc
import ray
from grainfn import fn

options = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}


def read(pool, n):
    stream = fn.ray_prefetch(pool, fn.from_dataset(fn.range(n)), adaptive=False)
    return list(fn.iterate(stream))


a, b, c = (fn.RayPool(1, num_cpus=0.5, init_options=options) for _ in range(3))
assert read(a, 5) == list(range(5))  # a starts Ray
assert read(b, 5) == list(range(5)) and read(c, 5) == list(range(5))
a.close()
assert ray.is_initialized(), "closing the pool that started Ray stopped it under the others"
assert read(b, 50) == list(range(50))
b.close()
assert ray.is_initialized(), "c still uses it"
del c
gc.collect()
assert not ray.is_initialized(), "the last pool that used grainfn's Ray is gone, Ray is not"

ray.init(**options)  # the user's own Ray: never shut down by grainfn
with fn.RayPool(1, num_cpus=0.5) as d:
    assert read(d, 5) == list(range(5))
assert ray.is_initialized(), "a pool shut down the user's Ray"
ray.shutdown()
print("ok")
"""


@pytest.mark.slow
def test_ray_started_by_pools_stops_with_the_last_of_them_and_the_users_never(
    tmp_path: Any,
) -> None:
    script = tmp_path / "pools.py"  # its own process: this one may be connected to a cluster
    script.write_text(TWO_POOLS)
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
