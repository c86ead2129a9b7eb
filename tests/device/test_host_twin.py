"""The host twin's floats are the device's, bit for bit (issue 46, point 3).

XLA compiles a pipeline's functions into one program: it fuses a multiply
and an add into one rounding, across stages too, and rounds a reduction
under `jax.vmap` unlike one outside it. The host twin (`jds.stream`, what
`fn.iterate(jds, state)` and host workers read) runs the part of the
pipeline that calls functions as the device's program on the CPU, so its
elements equal `step`'s bit for bit, on this CPU backend, in every epoch,
after a move between device and host, and in worker processes.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.dataset import pipeline_lines
from grainfn._src.device.host_twin import CHUNK, CompiledStage

ROWS = np.random.default_rng(0).random((96, 784), dtype=np.float32)


def affine(x: Any) -> Any:
    return x * 1.1 + 0.3


def standardize(x: Any) -> Any:
    return (x - x.mean()) / (x.std() + 1e-6)


def scaled(x: Any, key: Any) -> Any:
    low, high = jax.random.uniform(key, (2,), minval=0.5, maxval=1.5)
    return x * low + high


def noisy(x: Any, key: Any) -> Any:
    return x + 0.1 * jax.random.normal(key, x.shape)


def images(x: Any) -> Any:
    return {"image": (x.reshape(28, 28) - 0.1307) / 0.3081, "brightness": x.mean()}


PIPELINES: dict[str, Callable[[], Any]] = {
    "affine map": lambda: fn.map(affine, fn.source(ROWS)),
    "reduction": lambda: fn.map(standardize, fn.shuffle(fn.source(ROWS), seed=1)),
    "random_map uniform": lambda: fn.random_map(scaled, fn.source(ROWS), seed=2, rng="jax"),
    "random_map normal": lambda: fn.random_map(noisy, fn.source(ROWS), seed=3, rng="jax"),
    "maps fused across a shuffle": lambda: fn.map(
        lambda y: y + 0.3, fn.shuffle(fn.map(lambda x: x * 1.1, fn.source(ROWS)), seed=4)
    ),
    "a dict of images": lambda: fn.map(images, fn.source(ROWS)),
    "a mix of mapped components": lambda: fn.mix(
        [
            fn.map(affine, fn.source(ROWS[:40])),
            fn.random_map(noisy, fn.source(ROWS), seed=5, rng="jax"),
        ],
        [0.3, 0.7],
    ),
}
"""Pipelines whose float elements the host computed otherwise before (all but 'a dict')."""


def device_steps(jds: Any, count: int, state: Any = None) -> list[Any]:
    step = jax.jit(fn.JaxDataset.step)
    state = jds.init() if state is None else state
    elements = []
    for _ in range(count):
        element, state = step(jds, state)
        elements.append(jax.device_get(element))
    return elements


def assert_bitwise_equal(device: list[Any], host: list[Any]) -> None:
    assert len(device) == len(host)
    for j, (got, want) in enumerate(zip(device, host)):
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want), j
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype and a.shape == b.shape, (j, a.dtype, b.dtype)
            assert a.tobytes() == b.tobytes(), (
                f"element {j} differs in {int((a != b).sum())} values"
            )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PIPELINES))
@pytest.mark.parametrize("batch", [16, 3, None])
def test_the_host_twin_gives_steps_floats_bit_for_bit(name: str, batch: int | None) -> None:
    ds = PIPELINES[name]()
    top = ds if batch is None else fn.batch(batch, ds, drop_remainder=True)
    jds = fn.to_jax(top)
    count = 100 if batch is None else top.length + 3  # into the next epoch where it has one
    host = list(itertools.islice(fn.iterate(jds), count))
    assert_bitwise_equal(device_steps(jds, count), host)


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [(2, 16), (4, 2), (3, 1)])
def test_batches_of_batches_match_at_every_width(sizes: tuple[int, int]) -> None:
    """XLA rounds a reduction under a vmap of up to 4 rows unlike under a wider one."""
    outer, inner = sizes
    rows = fn.batch(inner, fn.map(standardize, fn.source(ROWS)), drop_remainder=True)
    batches = fn.batch(outer, rows, drop_remainder=True)
    nested = fn.to_jax(fn.map(lambda b: b * 0.5 + 0.25, batches))
    mapped_between = fn.to_jax(fn.batch(2, fn.map(standardize, batches), drop_remainder=True))
    for jds in (nested, mapped_between):
        count = jds.length + 1
        host = list(itertools.islice(fn.iterate(jds), count))
        assert_bitwise_equal(device_steps(jds, count), host)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [16, 3])
def test_every_device_form_matches_the_twin_for_elementwise_functions(batch: int) -> None:
    """steps, get_many and step_rows vmap the functions over other shapes than step: the same
    floats where they are elementwise (a reduction may round otherwise there: docs/jax.md)."""
    ds = fn.batch(batch, fn.map(affine, fn.random_map(noisy, fn.source(ROWS), seed=3, rng="jax")))
    jds = fn.to_jax(ds)
    host = list(itertools.islice(fn.iterate(jds), 8))
    stacked, _ = jax.jit(lambda jds, s: jds.steps(s, 8))(jds, jds.init())
    _, _, scanned = jax.jit(lambda jds, s: jds.scan(lambda c, b: (c, b), 0, s, 8, block=3))(
        jds, jds.init()
    )
    gathered = jax.jit(fn.JaxDataset.get_many)(jds, jnp.arange(8))
    for form in (stacked, scanned, gathered):
        assert_bitwise_equal(list(jax.device_get(form)), host)
    read = jax.jit(fn.JaxDataset.step_rows, static_argnums=3)
    shards = [read(jds, jds.init(), k, batch) for k in range(batch)]  # one row each
    assert_bitwise_equal([np.concatenate([jax.device_get(rows) for rows, _ in shards])], host[:1])


@pytest.mark.slow
def test_a_map_of_whole_batches_and_a_64_bit_run_match_too() -> None:
    batches = fn.map(standardize, fn.batch(8, fn.map(affine, fn.source(ROWS))))
    jds = fn.to_jax(batches)
    assert_bitwise_equal(device_steps(jds, 14), list(itertools.islice(fn.iterate(jds), 14)))
    with jax.enable_x64(True):
        wide = fn.to_jax(fn.batch(16, fn.random_map(noisy, fn.source(ROWS), seed=3, rng="jax")))
        host = list(itertools.islice(fn.iterate(wide), 8))
        assert_bitwise_equal(device_steps(wide, 8), host)


@pytest.mark.slow
def test_a_run_moved_from_device_to_host_and_back_keeps_its_images_bitwise() -> None:
    ds = fn.batch(
        16,
        fn.map(
            images, fn.shuffle(fn.random_map(noisy, fn.source(ROWS), seed=6, rng="jax"), seed=7)
        ),
    )
    jds = fn.to_jax(ds)
    device = device_steps(jds, 12)  # 6 batches an epoch: into epoch 1
    state = jds.device_state(fn.DatasetPosition(4))
    host = fn.iterate(jds, fn.state_from_dict(jds, fn.state_to_dict(jds, state)))
    assert_bitwise_equal(device[4:9], list(itertools.islice(host, 5)))
    back = fn.state_from_dict(jds, fn.state_to_dict(jds, host.state))  # host -> device
    assert_bitwise_equal(device[9:], device_steps(jds, 3, back))


@pytest.mark.slow
def test_host_workers_read_the_twin_bitwise_in_their_own_processes() -> None:
    jds = fn.to_jax(fn.batch(16, fn.random_map(noisy, fn.source(ROWS), seed=3, rng="jax")))
    workers = fn.mp_prefetch(2, jds.stream, adaptive=False)  # every block read by a worker
    host = list(itertools.islice(fn.iterate(workers), 9))
    assert_bitwise_equal(device_steps(jds, 9), host)
    stage = next(node for node in walk(jds.stream) if isinstance(node, CompiledStage))
    assert "_program" not in stage.__dict__  # compiled in the workers only


def test_the_twin_reads_as_the_repeated_dataset_and_far_epochs() -> None:
    ds = fn.batch(16, fn.map(affine, fn.shuffle(fn.source(ROWS), seed=8)))
    jds = fn.to_jax(ds)
    assert pipeline_lines(jds.stream) == pipeline_lines(fn.from_dataset(fn.repeat(None, ds)))
    assert any(isinstance(node, CompiledStage) for node in walk(jds.stream))
    position = 6 * 10**9 + 5  # epoch 10**9: past 2**31 positions in 32-bit mode
    far = next(fn.iterate(jds, fn.DatasetPosition(position)))
    assert_bitwise_equal(
        device_steps(jds, 1, jds.device_state(fn.DatasetPosition(position))), [far]
    )
    np.testing.assert_allclose(far, ds.get(position), rtol=1e-6)  # the host's, to rounding


@pytest.mark.slow
def test_a_compiled_stage_reads_any_block_and_pickles_without_its_program() -> None:
    jds = fn.to_jax(fn.random_map(noisy, fn.source(ROWS), seed=3, rng="jax"))
    stage = next(node for node in walk(jds.stream) if isinstance(node, CompiledStage))
    positions = np.array([5, 200, 3, 5, *range(CHUNK + 10)], dtype=np.int64)  # two calls
    whole = stage.get_many(positions)
    one_by_one = [stage.get(int(p)) for p in positions]
    assert_bitwise_equal(one_by_one, whole)
    copy = pickle.loads(pickle.dumps(stage))
    assert "_program" in stage.__dict__ and "_program" not in copy.__dict__
    assert_bitwise_equal(copy.get_many(positions), whole)
    device = jax.jit(fn.JaxDataset.get)(jds, 200)
    assert_bitwise_equal([jax.device_get(device)], [whole[1]])


def walk(node: Any) -> list[Any]:
    """`node` and every stage below it."""
    nodes = [node]
    for parent in node.parents:
        nodes.extend(walk(parent))
    return nodes


def test_the_plain_host_dataset_differs_only_by_rounding() -> None:
    """What the twin fixes: the host's own numpy maps round on their own (docs/jax.md)."""
    ds = fn.batch(16, fn.map(affine, fn.source(ROWS)))
    device = device_steps(fn.to_jax(ds), 6)
    host = ds.get_many(range(6))
    for got, want in zip(device, host):
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
        assert got.dtype == want.dtype == jnp.float32
