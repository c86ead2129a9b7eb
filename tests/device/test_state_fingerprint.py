"""A saved device state knows its pipeline (issue 46, point 4).

`step` carries an `EpochPosition` of two integers; `jds.saved_state` adds the
pipeline's fingerprint (a digest of each line of the description the dict
form saves) to save it, and `jds.device_state` checks it on restore. A state
restored into a pipeline built with another batch size, seed or source
length is refused, naming the stage lines that differ, in every form it
comes in (the saved state, the dict Orbax restores it as without a target,
the dict form of `fn.state_to_dict`); the dict form and the saved form
refuse the same pipelines.
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from grainfn import fn
from grainfn._src.core.dataset import pipeline_lines
from grainfn._src.core.state_codec import FINGERPRINT_WORDS, pipeline_fingerprint
from grainfn.fn import DatasetPosition, EpochPosition, SavedEpochPosition

ROWS = np.arange(80 * 3, dtype=np.float32).reshape(80, 3)


def build(batch: int = 4, seed: int = 3, rows: int = 40) -> Any:
    return fn.to_jax(fn.batch(batch, fn.shuffle(fn.source(ROWS[:rows]), seed=seed)))


VARIANTS = {
    "batch size": (build(batch=8), r"stage line 2, 'batch\(8\)  \[length 5\]' here\."),
    "seed": (build(seed=4), r"stage line 3, 'shuffle\(seed=4\)  \[length 40\]' here\."),
    "source length": (
        build(rows=80),
        r"stage line 2, 'batch\(4\)  \[length 20\]' here; line 3, 'shuffle\(seed=3\)  "
        r"\[length 80\]' here; line 4, 'source\(ndarray, length 80\)  \[length 80\]' here\.",
    ),
}
"""Pipelines that differ from `build()` in one parameter, and what the refusal names."""


def saved_state() -> SavedEpochPosition:
    """The saved form of `build()`'s state after 13 jitted steps: epoch 1, offset 3."""
    jds = build()
    state = jds.init()
    step = jax.jit(fn.JaxDataset.step)
    for _ in range(13):
        _, state = step(jds, state)
    return jds.saved_state(state)


@pytest.mark.parametrize("change", sorted(VARIANTS))
def test_a_saved_state_of_another_pipeline_is_refused_in_every_form(change: str) -> None:
    jds, saved = build(), saved_state()
    other, named = VARIANTS[change]
    message = (
        rf"(?s)The saved state at epoch 1, offset 3 belongs to another pipeline: its "
        rf"fingerprint differs in {named} .*Restore it into the pipeline it was saved with"
    )
    orbax_dict = {name: np.asarray(value) for name, value in saved._asdict().items()}
    refusals = {
        "device_state": lambda: other.device_state(saved),
        "device_state of Orbax's dict": lambda: other.device_state(orbax_dict),
        "host_state": lambda: other.host_state(saved),
        "state_to_dict": lambda: fn.state_to_dict(other, saved),
        "iterate": lambda: fn.iterate(other, orbax_dict),
    }
    for name, refused in refusals.items():
        assert refuses(refused, message), name
    # The dict form names the first stage line that differs, as saved and here.
    state = jds.device_state(saved)
    with pytest.raises(ValueError, match=r"State belongs to another pipeline: stage line [23] is"):
        fn.state_from_dict(other, fn.state_to_dict(jds, state))
    # ... and the pipeline the state belongs to takes it, in every form.
    for form in (saved, orbax_dict):
        assert jds.host_state(jds.device_state(form)) == DatasetPosition(13)
        assert jds.host_state(form) == DatasetPosition(13)
    assert fn.state_to_dict(jds, saved) == fn.state_to_dict(jds, state)


def test_the_dict_form_and_the_saved_form_refuse_the_same_pipelines() -> None:
    pipelines = [build(), build(batch=8), build(seed=4), build(rows=80), build(batch=5)]
    pipelines.append(fn.to_jax(fn.batch(4, fn.source(ROWS[:40]))))  # no shuffle
    pipelines.append(fn.to_jax(fn.map(lambda x: x * 2, fn.shuffle(fn.source(ROWS[:40]), seed=3))))
    for saver, restorer in itertools.product(pipelines, repeat=2):
        state = saver.device_state(DatasetPosition(3))
        saved, as_dict = saver.saved_state(state), fn.state_to_dict(saver, state)
        by_fingerprint = refuses(partial(restorer.device_state, saved))
        by_lines = refuses(partial(fn.state_from_dict, restorer, as_dict))
        assert by_fingerprint == by_lines == (saver is not restorer), (saver, restorer)


def test_a_rebuilt_pipeline_takes_the_saved_state_in_both_integer_modes() -> None:
    saved = saved_state()
    with jax.enable_x64(True):
        wide = build()
        restored = wide.device_state(saved)  # saved by a 32-bit run, restored by a 64-bit one
        assert wide.fingerprint == build().fingerprint
        assert restored.epoch.dtype == jnp.int64 and saved.pipeline.dtype == jnp.int32
        np.testing.assert_array_equal(wide.step(restored)[0], build().get(13))
        assert wide.saved_state(restored).pipeline.dtype == jnp.int32


def test_step_takes_no_saved_state_and_carries_two_integers() -> None:
    jds, saved = build(), saved_state()
    with pytest.raises(TypeError, match=r"step takes the EpochPosition .* jds\.device_state"):
        jax.jit(fn.JaxDataset.step)(jds, saved)
    with pytest.raises(TypeError, match="scan takes the EpochPosition"):
        jds.scan(lambda c, b: (c, None), 0, saved, 3)
    _, after = jax.jit(fn.JaxDataset.step)(jds, jds.device_state(saved))
    assert isinstance(after, EpochPosition) and len(jax.tree_util.tree_leaves(after)) == 2
    # saved_state works under jit too: a state saved from inside a jitted function.
    inside = jax.jit(lambda jds, state: jds.saved_state(jds.step(state)[1]))(jds, jds.init())
    assert jds.host_state(inside) == DatasetPosition(1)


def test_a_bare_state_holds_no_fingerprint_and_is_taken_unchecked() -> None:
    old = {"epoch": np.int32(1), "offset": np.int32(3)}  # Orbax's dict of a state saved bare
    for pipeline in (build(), VARIANTS["batch size"][0]):
        assert pipeline.host_state(old) == DatasetPosition(pipeline.period + 3)
        assert pipeline.host_state(pipeline.device_state(EpochPosition(1, 3))) == (
            DatasetPosition(pipeline.period + 3)
        )


def test_a_fingerprint_that_is_not_one_is_refused_saying_what_it_must_be() -> None:
    jds = build()
    wrong = {
        "a string": "abc",
        "too short": np.arange(3, dtype=np.int32),
        "floats": np.zeros(FINGERPRINT_WORDS),
        "below -1": np.full(FINGERPRINT_WORDS, -2, dtype=np.int32),
    }
    for name, pipeline in wrong.items():
        restore = partial(jds.device_state, {"epoch": 0, "offset": 1, "pipeline": pipeline})
        assert refuses(restore, r"it must be 16 integers in \[-1, 2\*\*31 - 1\]"), name


def test_the_fingerprint_has_a_word_per_line_and_one_for_lines_past_15() -> None:
    lines = [f"stage {i}" for i in range(20)]
    words = pipeline_fingerprint(lines)
    assert len(words) == FINGERPRINT_WORDS and all(0 <= word < 2**31 for word in words)
    assert words[:15] == pipeline_fingerprint(lines[:15])[:15]
    assert pipeline_fingerprint(lines[:15])[15] == -1
    changed = pipeline_fingerprint([*lines[:18], "another stage", lines[19]])
    assert changed[:15] == words[:15] and changed[15] != words[15]
    # A pipeline of 20 lines, whose line 19 differs: named by the last word.
    deep = fn.to_jax(fn.batch(2, fn.mix([fn.shuffle(fn.range(8), seed=s) for s in range(8)])))
    seeds = [0, 1, 2, 3, 4, 5, 6, 9]
    other = fn.to_jax(fn.batch(2, fn.mix([fn.shuffle(fn.range(8), seed=s) for s in seeds])))
    assert len(pipeline_lines(deep.stream)) == 20
    state = deep.saved_state(deep.init())
    message = r"its fingerprint differs in stage lines 15 to 19 \(one or more of them\)\."
    assert refuses(partial(other.device_state, state), message)
    shallow = fn.to_jax(fn.batch(2, fn.range(8)))  # 4 lines: the state's has 20
    message = (
        r"differs in stage line 2, 'batch\(2\)  \[length 4\]' here; line 3, 'range\(0, 8, 1\)  "
        r"\[length 8\]' here; line 4, which this pipeline lacks; and 11 more\."
    )
    assert refuses(partial(shallow.device_state, state), message)


def refuses(restore: Callable[[], Any], message: str = "") -> bool:
    """Whether `restore()` raises a ValueError (whose message, if it does, matches `message`)."""
    try:
        restore()
    except ValueError as error:
        assert re.search(message, str(error), re.DOTALL), str(error)
        return True
    return False


def train_step(train: dict[str, Any], jds: Any) -> dict[str, Any]:
    batch, data = jds.step(train["data"])
    return {"w": train["w"] + batch.sum(axis=0), "data": data}


def test_an_orbax_checkpoint_restores_only_into_its_own_pipeline(tmp_path: Path) -> None:
    jds = build()
    donating = jax.jit(train_step, donate_argnums=0)
    train = {"w": jnp.zeros(3), "data": jds.init()}
    with warnings.catch_warnings():  # the CPU backend may not reuse donated buffers
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        for _ in range(13):
            train = donating(train, jds)
        with ocp.CheckpointManager(tmp_path) as manager:
            manager.save(
                13, args=ocp.args.StandardSave({**train, "data": jds.saved_state(train["data"])})
            )
            manager.wait_until_finished()
        train = donating(train, jds)  # the run goes on, donating the state it saved
    for other, named in VARIANTS.values():
        target = {"w": jnp.zeros(3), "data": other.saved_state(other.init())}
        with ocp.CheckpointManager(tmp_path) as manager:
            with_target = manager.restore(13, args=ocp.args.StandardRestore(target))
            without = manager.restore(13, args=ocp.args.StandardRestore())
        assert isinstance(with_target["data"], SavedEpochPosition)
        assert set(without["data"]) == {"epoch", "offset", "pipeline"}
        for restored in (with_target["data"], without["data"]):
            with pytest.raises(ValueError, match=f"fingerprint differs in {named}"):
                other.device_state(restored)
    target = {"w": jnp.zeros(3), "data": jds.saved_state(jds.init())}
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(13, args=ocp.args.StandardRestore(target))
    data = jds.device_state(restored["data"])
    assert jds.host_state(data) == DatasetPosition(13)
    expected = np.asarray(restored["w"]) + build().get(13).sum(axis=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        resumed = donating({"w": restored["w"], "data": data}, jds)
    np.testing.assert_array_equal(np.asarray(resumed["w"]), expected)
    np.testing.assert_array_equal(np.asarray(resumed["w"]), np.asarray(train["w"]))
    assert jds.host_state(resumed["data"]) == DatasetPosition(14)
