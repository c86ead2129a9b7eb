"""The states of a to_jax step: EpochPositions, their saved form and the host twin's positions."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.state import DatasetPosition, EpochPosition, SavedEpochPosition
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.device.step_states import (
    PERIOD_LIMIT,
    after,
    check_fields,
    saved,
    state_period,
    step_bound,
    to_device,
    to_host,
)
from grainfn._src.index.device_ints import IntMode
from grainfn._src.index.slicing import MAX_POSITION

CODEC = StateCodec(fn.from_dataset(fn.repeat(None, fn.range(10))))
OTHER = StateCodec(fn.from_dataset(fn.repeat(None, fn.range(11))))
MODE_32, MODE_64 = IntMode(32), IntMode(64)


def test_the_period_is_the_length_below_2_to_the_31() -> None:
    assert state_period(1) == 1
    assert state_period(PERIOD_LIMIT - 1) == PERIOD_LIMIT - 1
    assert state_period(PERIOD_LIMIT) == PERIOD_LIMIT
    assert state_period(2**62) == PERIOD_LIMIT


def test_the_bound_is_the_last_position_of_the_largest_epoch() -> None:
    assert step_bound(10, MODE_32) == 2**31 * 10 - 1
    assert step_bound(0, MODE_32) == 2**31 - 1  # an empty dataset counts as period 1
    assert step_bound(10, MODE_64) == MAX_POSITION


def test_every_form_of_a_state_reaches_the_twins_position() -> None:
    assert to_host(EpochPosition(3, 2), 10, "s", CODEC) == DatasetPosition(32)
    assert to_host(DatasetPosition(7), 10, "s", CODEC) == DatasetPosition(7)
    assert to_host({"epoch": 1, "offset": 9}, 10, "s", CODEC) == DatasetPosition(19)
    arrays = EpochPosition(jnp.asarray(2, jnp.int32), np.int64(5))  # back from jit
    assert to_host(arrays, 10, "s", CODEC) == DatasetPosition(25)
    kept = SavedEpochPosition(1, 4, np.asarray(CODEC.fingerprint, np.int32))
    assert to_host(kept, 10, "s", CODEC) == DatasetPosition(14)
    as_dict = {"epoch": 1, "offset": 4, "pipeline": list(CODEC.fingerprint)}
    assert to_host(as_dict, 10, "s", CODEC) == DatasetPosition(14)


def test_a_saved_state_of_another_pipeline_is_refused() -> None:
    other = SavedEpochPosition(1, 4, list(OTHER.fingerprint))
    with pytest.raises(
        ValueError, match="The saved state at epoch 1, offset 4 belongs to another pipeline"
    ):
        to_host(other, 10, "s", CODEC)


def test_what_is_not_a_step_state_is_refused_naming_the_stage() -> None:
    with pytest.raises(TypeError, match="A state of to_jax of 'range' is an EpochPosition"):
        to_host((1, 2), 10, "range", CODEC)
    with pytest.raises(TypeError, match=r"got \{'epoch': 1\}"):
        to_host({"epoch": 1}, 10, "range", CODEC)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (EpochPosition(0, 10), r"field offset is 10; it must be an integer in \[0, 9\]"),
        (EpochPosition(-1, 0), r"field epoch is -1; it must be an integer in \[0, "),
        (EpochPosition(True, 0), "field epoch is True"),
        (EpochPosition(0, 1.0), "field offset is 1.0"),
        (EpochPosition(2**63, 0), "field epoch is 9223372036854775808"),
    ],
)
def test_check_fields_refuses_fields_out_of_range(state: EpochPosition, message: str) -> None:
    with pytest.raises(ValueError, match=message + ".*for to_jax of 'r' \\(period 10\\)"):
        check_fields(state, 10, "r")


def test_check_fields_gives_the_fields_in_range() -> None:
    assert check_fields(EpochPosition(MAX_POSITION, 9), 10, "r") == (MAX_POSITION, 9)


def test_a_device_state_holds_jax_integers_of_the_mode() -> None:
    state = to_device(DatasetPosition(32), 10, MODE_32, "s", CODEC)
    assert (int(state.epoch), int(state.offset)) == (3, 2)
    assert state.epoch.dtype == state.offset.dtype == np.int32
    with pytest.raises(ValueError, match="got -1"):
        to_device(DatasetPosition(-1), 10, MODE_32, "s", CODEC)
    with pytest.raises(ValueError, match=r"A host state's position is an integer, got 1\.5"):
        to_device(DatasetPosition(1.5), 10, MODE_32, "s", CODEC)  # type: ignore[arg-type]
    with pytest.raises(OverflowError, match="jax_enable_x64"):  # its epoch needs int64
        to_device(DatasetPosition(10 * 2**31), 10, MODE_32, "s", CODEC)


def test_the_saved_form_carries_the_pipelines_fingerprint() -> None:
    state = saved(jnp.asarray(1), jnp.asarray(2), CODEC)
    assert isinstance(state, SavedEpochPosition)
    assert state.pipeline.dtype == np.int32
    assert tuple(int(w) for w in state.pipeline) == tuple(CODEC.fingerprint)
    assert to_host(state, 10, "s", CODEC) == DatasetPosition(12)


def test_after_counts_steps_across_epochs() -> None:
    epoch, offset = jnp.asarray(2, jnp.int32), jnp.asarray(7, jnp.int32)
    later = after(MODE_32, epoch, offset, 25, 10)  # position 27 + 25 = 52: epoch 5, offset 2
    assert (int(later[0]), int(later[1])) == (5, 2)
    many = after(MODE_32, epoch, offset, jnp.arange(4), 10)
    assert many[0].tolist() == [2, 2, 2, 3] and many[1].tolist() == [7, 8, 9, 0]
