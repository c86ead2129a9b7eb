"""fn.ray_prefetch on a real local Ray cluster: a head and a worker node, 1 CPU each.

The actors read blocks of positions; the elements and the states must be
those of the pipeline read in this process, after every step, whatever
happens to the actors and the nodes.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import ray
from hypothesis import given, settings
from ray.cluster_utils import Cluster

import grainfn as grain
from grainfn import fn, testing
from grainfn._src.checkpoint import files
from grainfn._src.core.blocks import BlockReader
from grainfn._src.core.executor_policy import DEFAULT_TUNING, Tuning
from grainfn.fn import RayPool

# JAX warns at every fork once its threads run (as they do after other tests); adding a
# node to the cluster starts its processes by fork and exec, which the warning does not
# concern.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


@pytest.fixture(scope="module")
def pools(cluster: Cluster) -> Iterator[dict[int, RayPool]]:
    made = {count: RayPool(count, num_cpus=0.25) for count in (1, 2)}
    yield made
    for pool in made.values():
        pool.close()


def run(stream: Any, state: Any = None, stop: int | None = None) -> list[tuple[Any, Any]]:
    """(element, state after it) for every step of `stream` from `state`."""
    iterator = fn.iterate(stream, state)
    steps = []
    for element in itertools.islice(iterator, stop):
        steps.append((element, iterator.state))
    iterator.close()
    return steps


def assert_same_steps(got: list[tuple[Any, Any]], want: list[tuple[Any, Any]]) -> None:
    assert len(got) == len(want)
    for step, ((element, state), (expected, expected_state)) in enumerate(zip(got, want)):
        assert state == expected_state, step
        for a, b in zip(_leaves(element), _leaves(expected)):
            np.testing.assert_array_equal(a, b, err_msg=f"step {step}")


def _leaves(element: Any) -> list[Any]:
    if isinstance(element, dict):
        return [leaf for key in sorted(element) for leaf in _leaves(element[key])]
    if isinstance(element, (list, tuple)):
        return [leaf for item in element for leaf in _leaves(item)]
    return [element]


@pytest.mark.filterwarnings("ignore:ray_prefetch. an element takes")  # tiny pipelines
@settings(max_examples=8, deadline=None)
@given(stream=testing.streams())
def test_random_pipelines_equal_reading_here_after_every_step(
    pools: dict[int, RayPool], stream: Any
) -> None:
    want = run(stream, stop=60)
    for pool in pools.values():
        assert_same_steps(run(fn.ray_prefetch(pool, stream), stop=60), want)


def test_the_actors_spread_over_both_nodes(pools: dict[int, RayPool]) -> None:
    assert len(set(pools[2].nodes())) == 2  # SPREAD, the pool's default


def slow_square(x: int) -> int:
    time.sleep(0.002)
    return x * x


def pipeline(size: int = 300) -> Any:
    """A mix, a shuffle, random draws, a filter and batches: about `size` elements."""
    parts = [fn.range(size), fn.map(slow_square, fn.range(1000, 1000 + size // 3 + 1))]
    mixed = fn.mix(parts, [3, 1])
    noisy = fn.random_map(lambda x, rng: x + int(rng.integers(0, 7)), mixed, seed=3)
    kept = fn.filter(lambda x: x % 5 != 0, fn.shuffle(noisy, seed=1))
    return fn.batch(4, fn.from_dataset(kept))


@pytest.mark.slow
def test_states_resume_across_actor_counts_processes_and_none(pools: dict[int, RayPool]) -> None:
    stream = pipeline(size=90)
    want = run(stream)
    three = RayPool(3, num_cpus=0.25)
    readers = {
        "ray 2": lambda s: fn.ray_prefetch(pools[2], s),
        "ray 1": lambda s: fn.ray_prefetch(pools[1], s),
        "ray 3": lambda s: fn.ray_prefetch(three, s),
        "none": lambda s: s,
        "mp 2": lambda s: fn.mp_prefetch(2, s),
    }
    try:
        for (first, read_first), (then, read_then) in itertools.permutations(readers.items(), 2):
            if "ray" not in first + then:
                continue
            head = run(read_first(stream), stop=7)
            tail = run(read_then(stream), head[-1][1])
            assert_same_steps(head + tail, want)
    finally:
        three.close()


@pytest.mark.slow
def test_a_killed_actor_loses_nothing(pools: dict[int, RayPool]) -> None:
    stream = pipeline()
    want = run(stream)
    pool = RayPool(2, num_cpus=0.25)
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
        got = [(next(iterator), iterator.state)]  # the first blocks are in flight
        ray.kill(pool.slots[0].actor)
        for element in iterator:
            got.append((element, iterator.state))
            if len(got) == 20:
                for slot in list(pool.slots):  # every actor at once
                    ray.kill(slot.actor)
        assert_same_steps(got, want)
        assert pool.replaced >= 1
    finally:
        pool.close()


@pytest.mark.slow
def test_a_kill_during_the_first_block_loses_nothing(cluster: Cluster) -> None:
    stream = pipeline()
    want = run(stream)
    pool = RayPool(2, num_cpus=0.25)
    try:
        pool.start()
        ray.kill(pool.slots[1].actor)  # dead before it reads anything
        assert_same_steps(run(fn.ray_prefetch(pool, stream, adaptive=False)), want)
    finally:
        pool.close()


@pytest.mark.slow
def test_a_node_that_leaves_or_joins_mid_run_changes_nothing(cluster: Cluster) -> None:
    stream = pipeline()
    want = run(stream)
    extra = cluster.add_node(num_cpus=1, resources={"extra": 1})
    pool = RayPool(1, num_cpus=0.25, resources={"extra": 0.1})  # on the extra node only
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
        got = [(next(iterator), iterator.state)]
        cluster.remove_node(extra)  # the node goes with the actor and its blocks
        replacement = cluster.add_node(num_cpus=1, resources={"extra": 1})  # a node joins
        for element in iterator:
            got.append((element, iterator.state))
            if len(got) == 30:
                pool.resize(3)  # actors join mid-run
        assert_same_steps(got, want)
        cluster.remove_node(replacement)
    finally:
        pool.close()


def large(x: int) -> np.ndarray:
    """400 KB an element: a block's result goes to its node's object store, not inline."""
    return np.full(50_000, x, dtype=np.int64)


@pytest.mark.slow
def test_a_result_lost_with_its_nodes_object_store_is_read_again(cluster: Cluster) -> None:
    stream = fn.from_dataset(fn.map(large, fn.range(40)))
    want = list(range(40))
    extra = cluster.add_node(
        num_cpus=1, resources={"lossy": 1}, object_store_memory=80 * 2**20
    )  # a small store
    pool = RayPool(1, num_cpus=0.25, resources={"lossy": 0.1})
    try:
        iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
        got = [int(next(iterator)[0])]
        actor = pool.slots[0].actor
        ray.get(actor.node.remote())  # after the blocks sent before it: their results are stored
        cluster.remove_node(extra)  # and lost with the node
        cluster.add_node(num_cpus=1, resources={"lossy": 1}, object_store_memory=80 * 2**20)
        got += [int(element[0]) for element in iterator]
        assert got == want
        assert pool.lost >= 1  # a result was lost, and read again
    finally:
        pool.close()


def test_blocks_dropped_in_flight_leave_the_pool_ready(pools: dict[int, RayPool]) -> None:
    stream = pipeline()
    want = run(stream)
    for stop in (1, 2, 5):  # each read closes with blocks queued on the actors
        head = run(fn.ray_prefetch(pools[2], stream, adaptive=False), stop=stop)
        assert_same_steps(head, want[:stop])
    assert_same_steps(run(fn.ray_prefetch(pools[2], stream, adaptive=False)), want)


class FailingError(Exception):
    pass


def fail_at_7(x: int) -> int:
    if x == 7:
        raise FailingError(f"no {x}")
    return x


def test_a_user_error_on_an_actor_is_raised_as_with_no_actors(pools: dict[int, RayPool]) -> None:
    stream = fn.from_dataset(fn.map(fail_at_7, fn.range(20)))

    def outcome(reader: Any) -> tuple[list[int], str, list[int]]:
        iterator = fn.iterate(reader)
        before = []
        with pytest.raises(FailingError, match="no 7") as raised:
            for element in iterator:
                before.append(element)
        state = iterator.state
        rest = list(itertools.islice(fn.iterate(fn.from_dataset(fn.range(20)), state), 3))
        return before, type(raised.value).__name__, rest

    assert outcome(fn.ray_prefetch(pools[2], stream, adaptive=False)) == outcome(stream)
    assert outcome(stream)[0] == list(range(7))


def flags_of(image: np.ndarray) -> tuple[bool, int]:
    return bool(image.flags.writeable), int(image[0, 0, 0])


def test_a_pipeline_is_put_once_per_pool_and_actors_share_its_arrays(
    pools: dict[int, RayPool],
) -> None:
    pool = pools[2]
    images = np.random.default_rng(0).integers(0, 255, (300, 64, 64, 3), dtype=np.uint8)
    stream = fn.from_dataset(fn.map(flags_of, fn.source(images)))
    before = pool.puts
    for _ in range(3):  # three iterators, one put
        got = run(fn.ray_prefetch(pool, stream, adaptive=False))
        # Read-only where the parent's array is writable: a view of the object store.
        assert [element for element, _ in got] == [(False, int(i[0, 0, 0])) for i in images]
    assert pool.puts == before + 1


def test_a_map_writing_into_its_input_on_an_actor_is_told_to_copy_it(
    pools: dict[int, RayPool],
) -> None:
    def brighten(image: np.ndarray) -> np.ndarray:
        image += 1
        return image

    images = np.zeros((300, 64, 64, 3), np.uint8)
    stream = fn.from_dataset(fn.map(brighten, fn.source(images)))
    with pytest.raises(ValueError, match="read-only") as raised:
        run(fn.ray_prefetch(pools[1], stream, adaptive=False))
    assert "copy an array before writing into it" in "\n".join(raised.value.__notes__)


@pytest.mark.slow
def test_a_slow_block_is_also_read_by_a_second_actor(cluster: Cluster, tmp_path: Any) -> None:
    marker = str(tmp_path / "slept")

    def stall_once(x: int) -> int:
        if x == 600 and not os.path.exists(marker):  # the first read of it stalls
            open(marker, "w").close()
            time.sleep(30)
        return x

    stream = fn.from_dataset(fn.map(slow_square, fn.map(stall_once, fn.range(800))))
    pool = RayPool(2, num_cpus=0.25)
    try:
        got = [element for element, _ in run(fn.ray_prefetch(pool, stream, adaptive=False))]
        assert got == [x * x for x in range(800)] and os.path.exists(marker)
        assert pool.duplicated >= 1
    finally:
        pool.close()


def test_work_too_cheap_for_ray_gets_a_warning_with_figures(pools: dict[int, RayPool]) -> None:
    stream = fn.from_dataset(fn.range(20_000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [e for e, _ in run(fn.ray_prefetch(pools[1], stream, adaptive=False))] == list(
            range(20_000)
        )
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("too cheap to pay for Ray" in m and " µs to compute" in m for m in messages)


def pid_of(x: int) -> tuple[int, int]:
    return x, os.getpid()


def read_on_actors(
    pool: RayPool, n: int, here: float, ahead: float, tuning: Tuning = DEFAULT_TUNING
) -> tuple[list[tuple[int, int]], BlockReader]:
    """Reads `pid_of` over `range(n)` with `pool`'s actors, on a scripted clock.

    An element read here costs `here` seconds, a block from the actors keeps
    the consumer waiting `ahead` seconds an element, however long each really
    takes: where each block is read is the same on any machine. The clock
    stays in this process: the actors get the plain pipeline.
    """
    # The actors import this module for its maps, where `support` is not on the path.
    from support.scripted_clock import CostedExecutor, ScriptedClock, charged

    pipeline = fn.map(pid_of, fn.range(n))
    session = pool.session([pipeline], pinned=False)
    clock = ScriptedClock()
    executor = CostedExecutor(session.executor(0), clock, ahead)
    here_read = charged(pipeline, clock, here)
    reader = BlockReader(here_read, 0, executor=executor, clock=clock, tuning=tuning)
    got: list[tuple[int, int]] = []
    try:
        while True:
            try:
                got += reader.read()[1]
            except StopIteration:
                return got, reader
    finally:
        reader.close()
        session.close()


def test_cheap_work_moves_from_the_actors_to_this_process_without_a_warning(
    pools: dict[int, RayPool],
) -> None:
    # Here 1 µs an element, from the actors 20 µs: read here for `start_after` (10 ms),
    # tried on the actors, read here again.
    n = 100_000
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, reader = read_on_actors(pools[2], n, 1e-6, 2e-5, Tuning(start_after=0.01))
    assert [x for x, _ in got] == list(range(n))
    here = sum(pid == os.getpid() for _, pid in got)
    assert here > 0.9 * n, f"{here} of {n} elements read in this process"
    assert got[0][1] == os.getpid() and got[-1][1] == os.getpid() and reader.fallbacks == 1
    assert not [w for w in caught if "too cheap to pay for Ray" in str(w.message)]


def test_work_worth_the_actors_stays_there(pools: dict[int, RayPool]) -> None:
    # Here 5 ms an element, from the actors 0.1 ms: the actors are asked after the first
    # blocks (an element dearer than `start_at_once`), and keep the work.
    n = 600
    got, reader = read_on_actors(pools[2], n, 5e-3, 1e-4)
    assert [x for x, _ in got] == list(range(n))
    here = sum(pid == os.getpid() for _, pid in got)
    assert here < n // 10, f"{here} of {n} elements read in this process"
    assert got[0][1] == os.getpid() and reader.fallbacks == 0


def test_close_garbage_collection_and_a_double_close_leave_no_actor(cluster: Cluster) -> None:
    pool = RayPool(2, num_cpus=0.25)
    assert run(fn.ray_prefetch(pool, fn.from_dataset(fn.range(5))))[-1][0] == 4
    actors = [slot.actor for slot in pool.slots]
    pool.close()
    pool.close()
    assert_dead(actors)
    collected = RayPool(1, num_cpus=0.25)
    collected.start()
    actor = collected.slots[0].actor
    del collected
    gc.collect()
    assert_dead([actor])
    with pytest.raises(RuntimeError, match="closed"):
        pool.start()


def assert_dead(actors: list[Any]) -> None:
    """Every actor is gone: a call raises RayActorError (a kill takes effect soon, not at once)."""
    for actor in actors:
        deadline = time.monotonic() + 60
        with pytest.raises(ray.exceptions.RayActorError):
            while time.monotonic() < deadline:
                ray.get(actor.node.remote(), timeout=60)
                time.sleep(0.2)


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="num_actors"):
        RayPool(0)
    with pytest.raises(ValueError, match="num_cpus must be a number >= 0"):
        RayPool(1, num_cpus=-1)
    with pytest.raises(TypeError, match="ray_prefetch takes a RayPool first"):
        fn.ray_prefetch(2, fn.range(3))


def test_the_facade_method_and_the_data_loader_option(pools: dict[int, RayPool]) -> None:
    def build() -> Any:
        return grain.MapDataset.range(400).seed(3).shuffle().map(slow_square).to_iter_dataset()

    plain = iter(build().batch(8))
    with_ray = iter(build().ray_prefetch(pools[2]).batch(8))
    for _ in range(5):
        np.testing.assert_array_equal(next(with_ray), next(plain))
    resumed = iter(build().batch(8))
    resumed.set_state(with_ray.get_state())  # a state saved with Ray restores without it
    np.testing.assert_array_equal(next(resumed), next(plain))

    def loader(**options: Any) -> Any:
        return grain.DataLoader(
            data_source=list(range(300)),
            sampler=grain.samplers.IndexSampler(300, num_epochs=1, shuffle=True, seed=2),
            operations=[grain.transforms.Batch(10)],
            **options,
        )

    expected = [b.tolist() for b in loader()]
    assert [b.tolist() for b in loader(ray_pool=pools[1])] == expected
    with pytest.raises(ValueError, match="not both: pass worker_count=0 with ray_pool"):
        loader(ray_pool=pools[1], worker_count=2)
    with pytest.raises(TypeError, match=r"ray_pool must be a grainfn\.fn\.RayPool, got 3"):
        loader(ray_pool=3)


@pytest.mark.filterwarnings("ignore:ray_prefetch. an element takes")  # cheap
def test_elastic_hosts_each_a_ray_driver_move_from_two_hosts_to_one(
    pools: dict[int, RayPool], tmp_path: Any
) -> None:
    def pipeline(pool: RayPool | None) -> Any:
        ds = (
            grain.MapDataset.range(2000).seed(4).shuffle().to_iter_dataset().filter(lambda x: x % 3)
        )
        return ds.ray_prefetch(pool) if pool is not None else ds

    def hosts(count: int, pool: RayPool | None) -> list[Any]:
        return [
            grain.experimental.ElasticIterator(
                pipeline(pool), 24, grain.ShardOptions(h, count), num_logical_shards=4
            )
            for h in range(count)
        ]

    def take(iterators: list[Any], steps: int) -> list[Any]:
        return [np.concatenate([next(it) for it in iterators]) for _ in range(steps)]

    reference = take(hosts(1, None), 20)
    two = hosts(2, pools[2])  # each host its own driver and pool in a real job
    got = take(two, 10)
    for h, it in enumerate(two):
        files.write_state(tmp_path, it.get_state(), (h, 2))
    [one] = hosts(1, pools[1])
    files.restore(one, tmp_path)  # from the files of both hosts that saved
    got += take([one], 10)
    np.testing.assert_array_equal(np.stack(got), np.stack(reference))


SCRIPT = """
import os, sys
with open({marker!r}, "a") as marker:
    marker.write("imported\\n")
import ray
from grainfn import fn

def triple(x):
    return x * 3

ray.init(address={address!r}, log_to_driver=False)
pool = fn.RayPool(2, num_cpus=0.25)
got = list(fn.iterate(fn.ray_prefetch(pool, fn.from_dataset(fn.map(triple, fn.range(50))))))
assert got == [x * 3 for x in range(50)], got
pool.close()
print("ok")
"""


def test_actors_never_run_the_users_script(cluster: Cluster, tmp_path: Any) -> None:
    marker = tmp_path / "imports"
    script = tmp_path / "train.py"  # no __main__ guard: module level does everything
    script.write_text(SCRIPT.format(marker=str(marker), address=cluster.address))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
    assert marker.read_text() == "imported\n"  # once: by the driver alone


LOCAL_AFTER_JAX = """
import jax.numpy as jnp
from grainfn import fn

jnp.zeros(3).block_until_ready()  # JAX's threads run: it now warns at every fork
options = {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False}
with fn.RayPool(1, num_cpus=0, init_options=options) as pool:  # starts a local Ray
    got = list(fn.iterate(fn.ray_prefetch(pool, fn.from_dataset(fn.range(5)))))
assert got == [0, 1, 2, 3, 4], got
print("ok")
"""


@pytest.mark.slow
def test_a_pool_starting_ray_after_jax_says_nothing_of_forks(tmp_path: Any) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOCAL_AFTER_JAX)
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
    assert "os.fork() was called" not in result.stderr, result.stderr[-3000:]


def tokens(x: int) -> dict[str, Any]:
    return {"tokens": np.arange(x % 5 + 1, dtype=np.int32) + x}


def test_packing_over_ray_reads_equal_reading_here(pools: dict[int, RayPool]) -> None:
    documents = fn.from_dataset(fn.map(tokens, fn.shuffle(fn.range(200), seed=7)))
    packed = fn.first_fit_pack({"tokens": 9}, documents, num_packing_bins=3)
    want = run(packed)
    assert_same_steps(run(fn.ray_prefetch(pools[2], packed)), want)
    head = run(fn.ray_prefetch(pools[1], packed), stop=5)
    assert_same_steps(head + run(packed, head[-1][1]), want)


def interrupt_until(stop: threading.Event) -> None:
    """Interrupts the main thread every 0.2 s until `stop` is set."""
    while not stop.wait(0.2):
        _thread.interrupt_main()


def stop_interrupting(stop: threading.Event, interrupter: threading.Thread) -> None:
    """Stops `interrupt_until`, and takes here an interrupt it sent before it stopped."""
    while interrupter.is_alive():
        with contextlib.suppress(KeyboardInterrupt):
            stop.set()
            interrupter.join()
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(0.05)  # a pending interrupt is raised at the next instruction: here


@pytest.mark.slow
def test_an_interrupt_while_waiting_loses_nothing_and_close_leaves_no_actor(
    cluster: Cluster,
) -> None:
    stream = fn.from_dataset(fn.map(slow_square, fn.range(100_000)))
    pool = RayPool(2, num_cpus=0.25)
    iterator = fn.iterate(fn.ray_prefetch(pool, stream, adaptive=False))
    got = [next(iterator) for _ in range(3)]
    # Ctrl-C until one reaches the loop: a busy machine may delay one past many blocks, and
    # Python drops one that lands in a finalizer (a Ray reference's __del__, say).
    stop = threading.Event()
    interrupter = threading.Thread(target=interrupt_until, args=(stop,), daemon=True)
    # Ctrl-C raises KeyboardInterrupt even where the suite runs with SIGINT ignored (a job
    # started in the background inherits that, and then interrupt_main does nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in range(100_000):  # interrupted while it waits for a block, or between blocks
                got.append(next(iterator))
            time.sleep(60)  # at the latest, here
    finally:
        stop_interrupting(stop, interrupter)
        signal.signal(signal.SIGINT, previous)
    got.extend(itertools.islice(iterator, 100))  # goes on where it stood
    assert got == [x * x for x in range(len(got))] and len(got) > 100
    actors = [slot.actor for slot in pool.slots]
    iterator.close()
    pool.close()
    assert_dead(actors)
