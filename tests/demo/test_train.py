"""The demo's training loop and its Orbax checkpoints of parameters and data position."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grainfn._src.demo import data, train
from grainfn._src.demo.train import Log, Step


@pytest.mark.slow
def test_orbax_checkpoint_restores_params_and_data_position(files, tmp_path) -> None:
    params = train.init_params(0)
    seen: list[Step] = []
    with iter(data.pipeline(files, 8, 0, 0)) as batches:
        params = train.train(batches, params, 0, 3, seen.append)
        with train.checkpoint_manager(str(tmp_path)) as manager:
            train.save(manager, 3, params, batches)
        expected: list[Step] = []
        expected_params = train.train(batches, params, 3, 6, expected.append)
    fresh = iter(data.pipeline(files, 8, 0, 0))
    with train.checkpoint_manager(str(tmp_path)) as manager:
        step, restored = train.restore(manager, train.init_params(1), fresh)
    assert step == 3
    assert train.same_params(restored, params) == (True, 0.0)
    resumed: list[Step] = []
    final = train.train(fresh, restored, 3, 6, resumed.append)
    fresh.close()
    assert [s.digest for s in resumed] == [s.digest for s in expected]
    assert [s.step for s in resumed] == [4, 5, 6]
    assert train.same_params(final, expected_params)[0]


def test_restore_without_a_checkpoint_says_so(tmp_path, files) -> None:
    with (
        train.checkpoint_manager(str(tmp_path)) as manager,
        pytest.raises(RuntimeError, match="No checkpoint was committed in"),
    ):
        train.restore(manager, train.init_params(0), iter(data.pipeline(files, 8, 0, 0)))


def test_training_lowers_the_loss(files) -> None:
    steps: list[Step] = []
    with iter(data.pipeline(files, 16, 0, 0)) as batches:
        train.train(batches, train.init_params(0), 0, 60, steps.append)
    first = np.mean([s.loss for s in steps[:10]])
    last = np.mean([s.loss for s in steps[-10:]])
    assert last < first


def test_same_params_tells_bitwise_equal_from_different_names_shapes_and_values() -> None:
    a = {"w": np.zeros((2, 3), np.float32), "b": np.ones(3, np.float32)}
    assert train.same_params(a, {k: v.copy() for k, v in a.items()}) == (True, 0.0)
    assert train.same_params(a, {**a, "b": a["b"] + 0.5}) == (False, 0.5)
    assert train.same_params(a, {"w": a["w"]}) == (False, math.inf)  # a name missing
    assert train.same_params(a, {**a, "w": np.zeros((3, 2), np.float32)}) == (False, math.inf)
    assert train.same_params(a, {**a, "w": np.zeros((2, 3), np.float64)}) == (False, math.inf)


def test_a_log_sums_its_steps_waits_and_computes() -> None:
    log = Log("run", [Step(1, "a", 2.0, 0.25, 1.0), Step(2, "b", 1.0, 0.5, 2.0)])
    assert log.digests == ["a", "b"]
    assert log.wait == 0.75
    assert log.compute == 3.0
    assert Log("empty").digests == [] and Log("empty").wait == 0
