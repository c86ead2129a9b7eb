"""The demo's parts: data, pipeline, training loop, checkpoints, and the runner's checks."""

from __future__ import annotations

import os

import numpy as np
import pytest

from grainfn._src.demo import data, train
from grainfn._src.demo.preemption import group_members
from grainfn._src.demo.runner import Log, Plan, _first_difference, compare
from grainfn._src.demo.train import Step


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return data.write_sources(tmp_path_factory.mktemp("demo"), size=120)


def test_written_records_are_the_synthetic_images(files) -> None:
    from grainfn.sources import ArrayRecordDataSource

    images = data.SyntheticImages(size=120, seed=1)
    source = ArrayRecordDataSource(files["cats"])
    assert len(source) == 120
    assert len(files["cats"]) == 4 and len(files["dogs"]) == 2
    for index in (0, 57, 119):
        stored = data.decode(source[index])
        np.testing.assert_array_equal(stored["image"], images[index]["image"])
        assert stored["label"] == images[index]["label"]


def test_labels_are_learnable_from_the_images() -> None:
    images = data.SyntheticImages(size=50, seed=3)
    for index in range(50):
        item = images[index]
        label = item["label"]
        row, column = 4 * (label // 4), 4 * (label % 4)
        patch = item["image"][row : row + 4, column : column + 4, label % 3]
        assert patch.min() >= 95  # the bright patch marks the label


def test_synthetic_images_refuse_an_index_out_of_range() -> None:
    with pytest.raises(IndexError, match="index 10 is out of range for 10 images"):
        data.SyntheticImages(size=10, seed=0)[10]


def test_pipeline_batches_do_not_depend_on_the_number_of_workers(files) -> None:
    def digests(workers: int) -> list[str]:
        with iter(data.pipeline(files, 8, 5, workers)) as batches:
            return [data.digest(next(batches)) for _ in range(25)]  # more than one epoch

    without = digests(0)
    assert len(set(without)) == 25
    assert digests(2) == without


def test_epoch_batches_is_the_length_of_the_batched_mix() -> None:
    grain = data.grain
    mix = grain.MapDataset.mix([grain.MapDataset.range(120), grain.MapDataset.range(40)], [3, 1])
    assert data.epoch_batches(120, 8) == len(mix) // 8 == 20


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


def test_plans_always_leave_steps_lost_and_steps_to_resume() -> None:
    for steps in range(4, 200):
        plan = Plan.of(steps)
        assert 0 < plan.checkpoint_step < plan.kill_step < plan.steps


def test_first_difference() -> None:
    assert _first_difference("abc", "abc") is None
    assert _first_difference("abc", "abd") == 3
    assert _first_difference("ab", "abc") == 3
    assert _first_difference("", "") is None


def test_compare_reports_every_kind_of_difference() -> None:
    def log(digests: str) -> Log:
        return Log("x", [Step(i + 1, d, 0.0, 0.0, 0.0) for i, d in enumerate(digests)])

    plan = Plan.of(6)  # checkpoint 3, kill 4
    reference = log("abcdef")
    good = compare(plan, reference, log("abcd"), 3, log("def"))
    assert all(ok for ok, _ in good), good
    killed_differs = compare(plan, reference, log("abXd"), 3, log("def"))
    assert killed_differs[0] == (
        False,
        "The killed run's batch at step 3 differs from the reference run's.",
    )
    wrong_step = compare(plan, reference, log("abcd"), 2, log("cdef"))
    assert wrong_step[1] == (False, "The latest checkpoint is step 2, not step 3.")
    assert wrong_step[2][0]  # the batches after step 2 are still the reference run's
    short = compare(plan, reference, log("abcd"), 3, log("de"))
    assert short[2][0] is False


def test_processgroup_members_lists_live_members() -> None:
    assert os.getpid() in group_members(os.getpgid(0))
    assert group_members(2**22 + 12345) == set()  # no such group


def test_step_bars_start_their_clock_at_the_first_step() -> None:
    import time

    from grainfn._src.demo.runner import StepBar

    with StepBar("run", 10, enabled=True) as bar:  # (on stderr, which pytest captures)
        assert bar.bar is None  # nothing shown while workers start and jax compiles
        time.sleep(0.01)  # a slow start (workers, compiling)
        first_step = time.time()  # (tqdm's clock) the slow start is over
        for _ in range(10):
            bar.update()
        assert bar.bar.n == 10
        assert bar.bar.start_t >= first_step  # the slow start is not in its rate
