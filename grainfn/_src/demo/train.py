"""The demo's model and training loop: a one-hidden-layer MLP trained with plain SGD in JAX.

The loop reads a batch, takes one jitted SGD step and reports each step (the
batch's digest, the loss, and the time spent waiting for data and in the
step). Checkpoints hold the parameters and the data iterator together, with
Orbax's `CheckpointManager` and grainfn's iterator handler in
`ocp.args.Composite`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

import grainfn.checkpoint
from grainfn._src.demo.data import NUM_CLASSES, SHAPE, digest

HIDDEN = 64
LEARNING_RATE = 0.05

Params = dict[str, Any]
"""The model: `w1`, `b1` (input to hidden) and `w2`, `b2` (hidden to classes)."""


def init_params(seed: int) -> Params:
    """Random initial parameters for flattened 16x16x3 images.

    Examples:
        >>> {name: p.shape for name, p in init_params(0).items()}
        {'b1': (64,), 'b2': (10,), 'w1': (768, 64), 'w2': (64, 10)}
    """
    inputs = math.prod(SHAPE)
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {
        "b1": jnp.zeros(HIDDEN, jnp.float32),
        "b2": jnp.zeros(NUM_CLASSES, jnp.float32),
        "w1": jax.random.normal(k1, (inputs, HIDDEN), jnp.float32) / math.sqrt(inputs),
        "w2": jax.random.normal(k2, (HIDDEN, NUM_CLASSES), jnp.float32) / math.sqrt(HIDDEN),
    }


def loss_fn(params: Params, images: jax.Array, labels: jax.Array) -> jax.Array:
    """The mean cross-entropy of the MLP's predictions."""
    x = images.reshape(images.shape[0], -1)
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))


@jax.jit
def train_step(params: Params, images: jax.Array, labels: jax.Array) -> tuple[Params, jax.Array]:
    """One step of plain SGD; returns the new parameters and the loss before the step.

    Examples:
        >>> params = init_params(0)
        >>> images, labels = np.ones((4, 16, 16, 3), np.float32), np.arange(4)
        >>> new, loss = train_step(params, images, labels)
        >>> bool(loss > 0), bool(loss_fn(new, images, labels) < loss)
        (True, True)
    """
    loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
    new = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return new, loss


@dataclasses.dataclass(frozen=True)
class Step:
    """What one training step reports.

    Attributes:
        step: The number of steps done, this one included (1 for the first).
        digest: The digest of the batch it trained on (`data.digest`).
        loss: The loss on that batch before the step.
        wait: Seconds spent waiting for the batch (in `next`).
        compute: Seconds spent in the train step, until its result was ready.
    """

    step: int
    digest: str
    loss: float
    wait: float
    compute: float


@dataclasses.dataclass
class Log:
    """The steps one run reported, in order, and the seconds it spent in them."""

    name: str
    steps: list[Step] = dataclasses.field(default_factory=list)

    @property
    def digests(self) -> list[str]:
        return [step.digest for step in self.steps]

    @property
    def wait(self) -> float:
        return sum(step.wait for step in self.steps)

    @property
    def compute(self) -> float:
        return sum(step.compute for step in self.steps)


def train(
    batches: Iterator[Any],
    params: Params,
    first: int,
    last: int,
    on_step: Callable[[Step], None],
) -> Params:
    """Trains from step `first` (steps already done) to step `last`; returns the parameters.

    `on_step` is called after every step, with what it reports.

    Examples:
        >>> batch = {"image": np.ones((4, 16, 16, 3), np.float32), "label": np.arange(4)}
        >>> steps = []
        >>> _ = train(iter([batch] * 3), init_params(0), 1, 3, steps.append)
        >>> [s.step for s in steps], steps[0].digest == steps[1].digest
        ([2, 3], True)
    """
    for step in range(first + 1, last + 1):
        started = time.perf_counter()
        batch = next(batches)
        fetched = time.perf_counter()
        params, loss = train_step(params, batch["image"], batch["label"])
        loss_value = float(loss)  # waits for the step to finish
        done = time.perf_counter()
        on_step(Step(step, digest(batch), loss_value, fetched - started, done - fetched))
    return params


def checkpoint_manager(directory: str) -> ocp.CheckpointManager:
    """The Orbax manager of the demo's checkpoints in `directory`."""
    return ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(max_to_keep=2))


def save(
    manager: ocp.CheckpointManager, step: int, params: Params, iterator: Any
) -> tuple[float, float]:
    """Saves the parameters and the iterator's position as checkpoint `step`.

    Returns:
        The seconds `save` took (what the training loop pays; Orbax commits
        in the background) and the seconds until the checkpoint was committed.
    """
    args = ocp.args.Composite(
        params=ocp.args.StandardSave(params),
        data=grainfn.checkpoint.CheckpointSave(iterator),
    )
    started = time.perf_counter()
    manager.save(step, args=args)
    returned = time.perf_counter()
    manager.wait_until_finished()
    return returned - started, time.perf_counter() - started


def restore(manager: ocp.CheckpointManager, params: Params, iterator: Any) -> tuple[int, Params]:
    """Restores the latest checkpoint: sets `iterator`'s position and returns (step, params).

    `params` gives the structure, shapes and dtypes of the parameters to read.
    """
    step = manager.latest_step()
    if step is None:
        raise RuntimeError(f"No checkpoint was committed in {manager.directory}.")
    restored = manager.restore(
        step,
        args=ocp.args.Composite(
            params=ocp.args.StandardRestore(params),
            data=grainfn.checkpoint.CheckpointRestore(iterator),
        ),
    )
    return step, restored.params


def same_params(a: Params, b: Params) -> tuple[bool, float]:
    """Whether two sets of parameters are bitwise equal, and their largest absolute difference.

    Examples:
        >>> p = init_params(0)
        >>> same_params(p, p)
        (True, 0.0)
        >>> same_params(p, {**p, "b2": p["b2"] + 1e-3})[0]
        False
    """
    if sorted(a) != sorted(b):
        return False, math.inf
    equal, largest = True, 0.0
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, math.inf
        equal = equal and x.tobytes() == y.tobytes()
        largest = max(largest, float(np.max(np.abs(x - y), initial=0.0)))
    return equal, largest
