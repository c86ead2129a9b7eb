"""On-device pipelines: one epoch of MNIST-shaped SGD with `fn.to_jax`, against host feeding.

J1 trains a small MLP for one epoch of 60,000 x 784 float32 images with int32
labels, shuffled, in batches of 128 (468 steps): (a) grainfn, the whole epoch in
one `lax.scan` over `to_jax(ds).step`; (b) grainfn's host pipeline feeding the
same jitted step; Grain's pipeline feeding it; (c) a hand-written loop, one
`lax.scan` over the batches of a `jax.random.permutation`. All final parameters
are checked to be finite, and (a) and (b) to be equal (the same batches).

J2 resolves the indices of a shuffle of 60,000 positions for 2**20 positions
(17 epochs): `jax.jit(to_jax(ds).get_many)` against the numpy block path that
host reading uses (`ds._get_array`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import GRAIN, GRAINFN, HAND, Case, Row, Target, Timer, measure, require
from benchmarks.run import Step, run_suite
from grainfn import fn

HOST = "grainfn host"
NUMPY = "numpy blocks"
BATCH, HIDDEN, CLASSES, LEARNING_RATE = 128, 128, 10, 0.1


def mnist_shaped(rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    images = rng.random((rows, 784), dtype=np.float32)
    labels = rng.integers(0, CLASSES, rows).astype(np.int32)
    return images, labels


def init_params() -> dict[str, Any]:
    k1, k2 = jax.random.split(jax.random.key(0))
    return {
        "w1": jax.random.normal(k1, (784, HIDDEN)) * 0.05,
        "b1": jnp.zeros(HIDDEN),
        "w2": jax.random.normal(k2, (HIDDEN, CLASSES)) * 0.05,
        "b2": jnp.zeros(CLASSES),
    }


def loss(params: dict[str, Any], batch: dict[str, Any]) -> Any:
    hidden = jax.nn.relu(batch["image"] @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(log_probs, batch["label"][:, None], axis=1).mean()


def sgd_step(params: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    grads = jax.grad(loss)(params, batch)
    return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)


jitted_step = jax.jit(sgd_step)


@functools.partial(jax.jit, static_argnums=2)
def scan_epoch(params: dict[str, Any], jds: Any, steps: int) -> tuple[dict[str, Any], Any]:
    """(a): the whole epoch, data included, in one compiled loop."""

    def body(carry: Any, _: Any) -> tuple[Any, None]:
        params, state = carry
        batch, state = jds.step(state)
        return (sgd_step(params, batch), state), None

    (params, state), _ = jax.lax.scan(body, (params, jds.init()), None, length=steps)
    return params, state


@functools.partial(jax.jit, static_argnums=4)
def permutation_epoch(
    params: dict[str, Any], images: Any, labels: Any, key: Any, steps: int
) -> dict[str, Any]:
    """(c): the hand-written loop: a permutation, cut into batches, scanned."""
    order = jax.random.permutation(key, images.shape[0])[: steps * BATCH].reshape(steps, BATCH)

    def body(params: Any, rows: Any) -> tuple[Any, None]:
        return sgd_step(params, {"image": images[rows], "label": labels[rows]}), None

    params, _ = jax.lax.scan(body, params, order)
    return params


def host_epoch(params: dict[str, Any], batches: Any) -> dict[str, Any]:
    """(b) and Grain: a host pipeline feeding the jitted step."""
    for batch in batches:
        params = jitted_step(params, batch)
    return jax.block_until_ready(params)


class Rows:
    """A Grain source of dict rows over two arrays."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"image": self.images[index], "label": self.labels[index]}


def epoch_rows(rows: int) -> list[Row]:
    import grain

    images, labels = mnist_shaped(rows)
    ds = fn.batch(
        BATCH,
        fn.shuffle(fn.source({"image": images, "label": labels}), seed=0),
        drop_remainder=True,
    )
    jds = fn.to_jax(ds)
    device_images, device_labels = jnp.asarray(images), jnp.asarray(labels)
    params, steps = init_params(), ds.length
    grain_ds = (
        grain.MapDataset.source(Rows(images, labels))
        .shuffle(seed=0)
        .batch(BATCH, drop_remainder=True)
        .to_iter_dataset()
    )
    cases = {
        GRAINFN: Case(lambda: jax.block_until_ready(scan_epoch(params, jds, steps)[0])),
        HOST: Case(lambda: host_epoch(params, fn.iterate(ds))),
        GRAIN: Case(lambda: host_epoch(params, grain_ds)),
        HAND: Case(
            lambda: jax.block_until_ready(
                permutation_epoch(params, device_images, device_labels, jax.random.key(0), steps)
            )
        ),
    }
    timings = measure(cases, Timer(repeats=3, budget=60.0))
    results = {label: timing.result for label, timing in timings.items()}
    for label, result in results.items():
        finite = all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree_util.tree_leaves(result))
        require(finite, f"J1: {label} trained to non-finite parameters")
    same = jax.tree_util.tree_map(
        lambda a, b: np.allclose(a, b, rtol=1e-4, atol=1e-5), results[GRAINFN], results[HOST]
    )
    require(all(jax.tree_util.tree_leaves(same)), "J1: the scan and host pipeline trained apart")
    figures = {label: timing.best for label, timing in timings.items()}
    detail = f"{rows} x 784 float32 rows, batch {BATCH}, {steps} SGD steps of a 784-{HIDDEN}-10 MLP"
    return [Row("J1", f"one epoch, {steps} steps", figures, detail=detail)]


def index_rows(count: int) -> list[Row]:
    ds = fn.shuffle(fn.range(60_000), seed=0)
    get_many = jax.jit(fn.to_jax(ds).get_many)
    positions, host_positions = jnp.arange(count, dtype=jnp.int32), np.arange(count)
    cases = {
        GRAINFN: Case(lambda: get_many(positions).block_until_ready()),
        NUMPY: Case(lambda: ds._get_array(host_positions)),
    }
    timings = measure(cases, Timer(repeats=5, budget=20.0))
    device, host = (np.asarray(timings[k].result) for k in (GRAINFN, NUMPY))
    require(np.array_equal(device, host), "J2: device and host indices differ")
    figures = {label: timing.best / count for label, timing in timings.items()}
    title = f"shuffle indices, {count} positions"
    return [Row("J2", title, figures, items=count, unit="rate", detail="positions per second")]


def steps(quick: bool) -> list[Step]:
    rows, count = (6_000, 2**16) if quick else (60_000, 2**20)
    return [Step("J1", lambda: epoch_rows(rows)), Step("J2", lambda: index_rows(count))]


def targets(rows: dict[str, Row]) -> list[Target]:
    epoch, index = rows["J1"], rows["J2"]
    return [
        Target.at_least("J1: scan >= 3x the host pipeline", epoch.speedup(HOST), 3.0),
        Target.at_most("J1: scan within 1.2x of the hand loop", epoch.over(HAND), 1.2),
        Target.at_least("J2: jit >= the numpy block path", index.speedup(NUMPY), 1.0),
    ]


if __name__ == "__main__":
    run_suite("jax_device", __doc__ or "", steps, targets)
