"""A JAX training loop as researchers write it: a jitted step that donates its train state.

The data state rides in the train state, so it is donated with the model's
parameters at every step, saved with them in one Orbax checkpoint, and
restored with them; the batches after a resume are those of the run that
went on.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from grainfn import fn

FEATURES = 4


def pipeline() -> Any:
    rows = np.arange(40 * (FEATURES + 1), dtype=np.float32).reshape(40, FEATURES + 1) / 100
    return fn.to_jax(fn.batch(4, fn.shuffle(fn.source(rows), seed=3)))


JDS = pipeline()


def train_step(train: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """One step of least squares; returns the new train state and the batch it read."""
    batch, data = JDS.step(train["data"])
    x, y = batch[:, :FEATURES], batch[:, FEATURES]

    def loss(w: Any) -> Any:
        return jnp.mean((x @ w - y) ** 2)

    w = train["w"] - 0.1 * jax.grad(loss)(train["w"])
    return {"w": w, "data": data}, batch


donating_step = jax.jit(train_step, donate_argnums=0)


def run(train: dict[str, Any], steps: int) -> tuple[dict[str, Any], list[np.ndarray]]:
    batches = []
    with warnings.catch_warnings():
        # The CPU backend cannot reuse donated buffers, and says so: that is no failure.
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        for _ in range(steps):
            train, batch = donating_step(train)
            batches.append(np.asarray(batch))
    return train, batches


@pytest.mark.parametrize("start", ["init", "device_state", "step"])
def test_a_jitted_step_donates_a_train_state_holding_the_data_state(start: str) -> None:
    states = {
        "init": JDS.init,
        "device_state": lambda: JDS.device_state(fn.DatasetPosition(0)),
        "step": lambda: JDS.step(JDS.init())[1],
    }
    train = {"w": jnp.zeros(FEATURES), "data": states[start]()}
    skipped = 1 if start == "step" else 0
    after, batches = run(train, 5)
    host = fn.iterate(JDS)  # the host twin: the same batches
    expected = [next(host) for _ in range(skipped + 5)][skipped:]
    assert all(np.array_equal(got, want) for got, want in zip(batches, expected))
    assert int(after["data"].offset) == skipped + 5


def test_a_donating_loop_saved_with_orbax_resumes_with_the_same_batches(tmp_path: Path) -> None:
    train = {"w": jnp.zeros(FEATURES), "data": JDS.init()}
    train, _ = run(train, 3)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(3, args=ocp.args.StandardSave(train))
        manager.wait_until_finished()
    went_on, expected = run(train, 12)  # past the end of the epoch (10 batches)
    target = {"w": jnp.zeros(FEATURES), "data": JDS.init()}
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(3, args=ocp.args.StandardRestore(target))
    resumed, batches = run(restored, 12)
    assert all(np.array_equal(got, want) for got, want in zip(batches, expected))
    assert np.array_equal(np.asarray(resumed["w"]), np.asarray(went_on["w"]))
    assert (int(resumed["data"].epoch), int(resumed["data"].offset)) == (1, 5)
