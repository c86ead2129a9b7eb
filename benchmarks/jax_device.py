"""On-device pipelines: one epoch of MNIST-shaped SGD with `fn.to_jax`, against host feeding.

J1: an MLP for an epoch of 60,000 x 784 float32 images, batches of 128, eight ways (the subject
`to_jax(ds).scan`, hand loops, host pipelines), batch checksums equal. J2: `jax.jit(to_jax(ds)
.get_many)` for 2**20 positions of a shuffle. See docs/performance.md, "On device".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import harness as h
from benchmarks.run import run_suite
from grainfn import fn

STEP_SCAN = "grainfn step scan"
HAND_PER_EPOCH = "hand, permutation per epoch"
HOST = "grainfn host"
PUT = "grainfn put_on_device"
GRAIN_PUT = "Grain device_put"
NUMPY = "numpy blocks"
BATCH, HIDDEN, CLASSES, LEARNING_RATE = 128, 128, 10, 0.1


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    rows: int = 60_000  # J1: images of the epoch
    positions: int = 2**20  # J2: positions resolved


DEFAULT, QUICK = Config(), Config(rows=6_000, positions=2**16)


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


def checksum(batch: dict[str, Any]) -> Any:
    """An int32 checksum of a batch: wrapping integer sums, the same in any summation order."""
    bits = jax.lax.bitcast_convert_type(batch["image"], jnp.int32)
    return bits.sum() * jnp.int32(31) + batch["label"].sum()


def sgd_step(params: dict[str, Any], batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    grads = jax.grad(loss)(params, batch)
    params = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, checksum(batch)


jitted_step = jax.jit(sgd_step)


@functools.partial(jax.jit, static_argnums=2)
def block_epoch(params: dict[str, Any], jds: Any, steps: int) -> tuple[dict[str, Any], Any]:
    """The subject: the whole epoch in one `jds.scan`, indices resolved a block at a time."""
    params, _, sums = jds.scan(sgd_step, params, jds.init(), steps)
    return params, sums


@functools.partial(jax.jit, static_argnums=2)
def step_scan_epoch(params: dict[str, Any], jds: Any, steps: int) -> tuple[dict[str, Any], Any]:
    """The whole epoch in a `lax.scan` over `jds.step`: one step's indices at a time."""

    def body(carry: Any, _: Any) -> tuple[Any, Any]:
        params, state = carry
        batch, state = jds.step(state)
        params, total = sgd_step(params, batch)
        return (params, state), total

    (params, _), sums = jax.lax.scan(body, (params, jds.init()), None, length=steps)
    return params, sums


@jax.jit
def gather_epoch(params: dict[str, Any], images: Any, labels: Any, order: Any) -> Any:
    """The hand-written loop: batches of a permutation (`order`, steps x BATCH), scanned."""

    def body(params: Any, rows: Any) -> tuple[Any, Any]:
        return sgd_step(params, {"image": images[rows], "label": labels[rows]})

    return jax.lax.scan(body, params, order)


def permutation(key: Any, rows: int, steps: int) -> Any:
    return jax.random.permutation(key, rows)[: steps * BATCH].reshape(steps, BATCH)


@functools.partial(jax.jit, static_argnums=4)
def permutation_epoch(
    params: dict[str, Any], images: Any, labels: Any, key: Any, steps: int
) -> Any:
    """The hand-written loop drawing its permutation inside the epoch."""
    return gather_epoch(params, images, labels, permutation(key, images.shape[0], steps))


def host_epoch(params: dict[str, Any], batches: Any) -> tuple[dict[str, Any], Any]:
    """A host pipeline feeding the jitted step."""
    sums = []
    for batch in batches:
        params, total = jitted_step(params, batch)
        sums.append(total)
    return jax.block_until_ready((params, jnp.stack(sums)))


class Rows:
    """A Grain source of dict rows over two arrays."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"image": self.images[index], "label": self.labels[index]}


def device_kind() -> str:
    device = jax.devices()[0]
    return f"{device.device_kind} ({device.platform})"


def epoch_rows(rows: int) -> list[h.Row]:
    import grain

    images, labels = mnist_shaped(rows)
    shuffled = fn.shuffle(fn.source({"image": images, "label": labels}), seed=0)
    ds = fn.batch(BATCH, shuffled, drop_remainder=True)
    jds = fn.to_jax(ds)
    dev = jax.devices()[0]
    device_images, device_labels = jnp.asarray(images), jnp.asarray(labels)
    params, steps = init_params(), ds.length
    order = jax.block_until_ready(permutation(jax.random.key(0), rows, steps))
    grain_ds = (
        grain.MapDataset.source(Rows(images, labels))
        .shuffle(seed=0)
        .batch(BATCH, drop_remainder=True)
        .to_iter_dataset()
    )
    arrays = (device_images, device_labels)

    def per_epoch() -> Any:
        return permutation_epoch(params, *arrays, jax.random.key(0), steps)

    def put() -> Any:
        return host_epoch(params, fn.iterate(fn.put_on_device(dev, fn.from_dataset(ds))))

    cases = {
        h.GRAINFN: h.Case(lambda: jax.block_until_ready(block_epoch(params, jds, steps))),
        STEP_SCAN: h.Case(lambda: jax.block_until_ready(step_scan_epoch(params, jds, steps))),
        h.HAND: h.Case(lambda: jax.block_until_ready(gather_epoch(params, *arrays, order))),
        HAND_PER_EPOCH: h.Case(lambda: jax.block_until_ready(per_epoch())),
        HOST: h.Case(lambda: host_epoch(params, fn.iterate(ds))),
        PUT: h.Case(put),
        h.GRAIN: h.Case(lambda: host_epoch(params, grain_ds)),
        GRAIN_PUT: h.Case(lambda: host_epoch(params, grain.experimental.device_put(grain_ds, dev))),
    }
    timings = h.measure(cases, h.Timer(repeats=3, budget=60.0))
    for label, timing in timings.items():
        trained = jax.tree_util.tree_leaves(timing.result[0])
        h.require(all(bool(jnp.isfinite(p).all()) for p in trained), f"J1: {label} diverged")
    sums = {label: np.asarray(timings[label].result[1]) for label in timings if "hand" not in label}
    for label, got in sums.items():
        h.require(got.shape == (steps,), f"J1: {label} ran {got.shape} steps, not {steps}")
        at = int(np.argmax(got != sums[h.GRAINFN]))
        message = f"J1: {label} read other batches than the block form (at step {at})"
        h.require(np.array_equal(got, sums[h.GRAINFN]), message)
    figures = {label: timing.best for label, timing in timings.items()}
    detail = (
        f"{rows} x 784 float32 rows, batch {BATCH}, {steps} SGD steps of a 784-{HIDDEN}-10 MLP, "
        f"on {device_kind()}; {len(sums)} paths' per-step batch checksums equal"
    )
    return [h.Row("J1", f"one epoch, {steps} steps", figures, detail=detail)]


def index_rows(count: int) -> list[h.Row]:
    ds = fn.shuffle(fn.range(60_000), seed=0)
    get_many = jax.jit(fn.to_jax(ds).get_many)
    positions, host_positions = jnp.arange(count, dtype=jnp.int32), np.arange(count)
    cases = {
        h.GRAINFN: h.Case(lambda: get_many(positions).block_until_ready()),
        NUMPY: h.Case(lambda: ds._get_array(host_positions)),
    }
    timings = h.measure(cases, h.Timer(repeats=5, budget=20.0))
    device, host = (np.asarray(timings[k].result) for k in (h.GRAINFN, NUMPY))
    h.require(np.array_equal(device, host), "J2: device and host indices differ")
    figures = {label: timing.best / count for label, timing in timings.items()}
    title = f"shuffle indices, {count} positions"
    return [h.Row("J2", title, figures, items=count, unit="rate", detail="positions per second")]


def steps(c: Config) -> list[h.Step]:
    return [h.Step("J1", lambda: epoch_rows(c.rows)), h.Step("J2", lambda: index_rows(c.positions))]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    epoch, index = rows["J1"], rows["J2"]
    host, put = (10.0, 1.2) if jax.devices()[0].platform != "cpu" else (3.0, 1.0)
    text = f"J1: put_on_device feeding >= {put}x plain feeding"
    return [
        h.Target.at_most("J1: block form <= 1.0x the hand loop", epoch.over(h.HAND), 1.0),
        h.Target.at_least(f"J1: block form >= {host:g}x host feeding", epoch.speedup(HOST), host),
        h.Target.at_least(text, epoch.ratio(HOST, PUT), put),
        h.Target.at_least("J2: jit >= the numpy block path", index.speedup(NUMPY), 1.0),
    ]


if __name__ == "__main__":
    run_suite("jax_device", __doc__ or "", steps, targets, DEFAULT, QUICK)
