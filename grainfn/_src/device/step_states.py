"""The states of a `to_jax` step: `EpochPosition`s, and their host twin's `DatasetPosition`s.

A step never ends, so its host twin is the dataset repeated. Its state is
`EpochPosition(epoch, offset)`, the position `epoch * period + offset`, where
`period` is the dataset's length if that is below 2**31 and 2**31 otherwise:
both fields fit int32, and a state means the same in both integer modes.
A state is saved as a `SavedEpochPosition`, which adds the fingerprint of
its pipeline (`StateCodec`'s), checked on restore: `step` never carries it.
This module converts states to and from the twin's positions and the saved
form, and turns one into the top stage's (epoch, offset) form for the
compiled program.
"""

from __future__ import annotations

from typing import Any, cast

from grainfn._src.core.state import DatasetPosition, EpochPosition, SavedEpochPosition, as_host
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.index.device_ints import IntMode, Split, require, split
from grainfn._src.index.slicing import MAX_POSITION
from grainfn._src.index.wide import Wide

PERIOD_LIMIT = 2**31
"""The longest period of a step state: its fields fit int32 in both integer modes."""


def state_period(length: int) -> int:
    """The period of the step states of a dataset of `length`: its length, if below 2**31.

    Examples:
        >>> state_period(60), state_period(2**40)
        (60, 2147483648)
    """
    return length if length < PERIOD_LIMIT else PERIOD_LIMIT


def step_bound(length: int, mode: IntMode) -> int:
    """The largest position a step state reaches: its epoch is at most the dtype's maximum."""
    return min(MAX_POSITION, (mode.top + 1) * state_period(max(length, 1)) - 1)


def to_host(state: Any, period: int, stage: str, codec: StateCodec) -> DatasetPosition:
    """The host twin's state at the same place as `state` (see `JaxDataset.host_state`).

    Args:
        state: An `EpochPosition`, a `SavedEpochPosition` (its fingerprint
            checked), the dict Orbax restores either as without a target, or
            a `DatasetPosition` of the twin (returned as is).
        period: The period of the states.
        stage: The top stage, for messages.
        codec: The twin's `StateCodec`: a saved state must hold its fingerprint.

    Examples:
        >>> from grainfn import fn
        >>> codec = StateCodec(fn.from_dataset(fn.repeat(None, fn.range(10))))
        >>> to_host(EpochPosition(epoch=3, offset=2), 10, "range(10)", codec)
        DatasetPosition(position=32)
        >>> to_host({"epoch": 3, "offset": 12}, 10, "range(10)", codec)
        Traceback (most recent call last):
        ...
        ValueError: EpochPosition field offset is 12; it must be an integer in [0, 9] for \
to_jax of 'range(10)' (period 10).
    """
    state = _record(as_host(state))
    if isinstance(state, DatasetPosition):
        return state
    if isinstance(state, SavedEpochPosition):
        epoch, offset, pipeline = state
        codec.check_fingerprint(pipeline, f"The saved state at epoch {epoch!r}, offset {offset!r}")
        state = EpochPosition(epoch, offset)
    if not isinstance(state, EpochPosition):
        raise TypeError(
            f"A state of to_jax of {stage!r} is an EpochPosition, a SavedEpochPosition or "
            f"its host twin's DatasetPosition, got {state!r}."
        )
    epoch, offset = check_fields(state, period, stage)
    return DatasetPosition(epoch * period + offset)


def to_device(
    state: Any, period: int, mode: IntMode, stage: str, codec: StateCodec
) -> EpochPosition:
    """The `EpochPosition` of jax integers at the same place (see `JaxDataset.device_state`)."""
    import jax.numpy as jnp

    position = to_host(state, period, stage, codec).position
    if isinstance(position, bool) or not isinstance(position, int):
        raise ValueError(f"A host state's position is an integer, got {position!r}.")
    if not 0 <= position <= MAX_POSITION:
        raise ValueError(f"A host state's position lies in [0, 2**63 - 1], got {position}.")
    epoch, offset = divmod(position, period)
    require(
        epoch <= mode.top,
        f"the state at position {position}",
        f"its epoch {epoch} does not fit {mode.position_dtype}",
        mode,
    )
    epoch_array, offset_array = (jnp.asarray(v, mode.position_dtype) for v in (epoch, offset))
    return EpochPosition(cast(int, epoch_array), cast(int, offset_array))


def check_fields(state: EpochPosition, period: int, stage: str) -> tuple[int, int]:
    """`(epoch, offset)` of a state of Python integers, refusing one out of range."""
    epoch, offset = state
    for name, value, top in (("epoch", epoch, MAX_POSITION), ("offset", offset, period - 1)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            raise ValueError(
                f"EpochPosition field {name} is {value!r}; it must be an integer in "
                f"[0, {top}] for to_jax of {stage!r} (period {period})."
            )
    return epoch, offset


def top_split(mode: IntMode, epoch: Any, offset: Any, length: int, period: int) -> Split:
    """The top stage's Split at `epoch * period + offset` (jax integers of the mode)."""
    unsigned_epoch, unsigned_offset = epoch.astype(mode.unsigned), offset.astype(mode.unsigned)
    if period == length:  # below 2**31: offsets are narrow
        return Split(unsigned_epoch, unsigned_offset)
    shift = mode.unsigned.type(31)  # period 2**31: the epoch's bits, then the offset's 31
    if mode.bits == 64:
        position: Any = (unsigned_epoch << shift) | unsigned_offset
    else:
        high = unsigned_epoch >> mode.unsigned.type(1)  # epoch * 2**31 // 2**32
        position = Wide(high, (unsigned_epoch << shift) | unsigned_offset)
    return split(mode, position, length, step_bound(length, mode))


def saved(epoch: Any, offset: Any, codec: StateCodec) -> SavedEpochPosition:
    """The saved form of the state at `(epoch, offset)`: with `codec`'s fingerprint (jax int32s)."""
    import jax.numpy as jnp

    pipeline = jnp.asarray(codec.fingerprint, jnp.int32)
    return SavedEpochPosition(epoch, offset, cast(int, pipeline))


def _record(state: Any) -> Any:
    """A state record from the dict Orbax restores a NamedTuple as without a target."""
    if isinstance(state, dict):
        for record in (SavedEpochPosition, EpochPosition, DatasetPosition):
            if set(state) == set(record._fields):
                return record(**{name: as_host(state[name]) for name in record._fields})
    return state


def after(mode: IntMode, epoch: Any, offset: Any, count: Any, period: int) -> tuple[Any, Any]:
    """`(epoch, offset)` of the state `count` steps after `(epoch, offset)` (jax integers).

    `count` is a jax or Python integer below 2**31, so `offset + count` (with
    `offset < period <= 2**31`) fits the mode's unsigned integers; `count` may
    be an array, for the states of many steps at once.
    """
    import jax.numpy as jnp

    unsigned = mode.unsigned.type
    total = offset.astype(mode.unsigned) + jnp.asarray(count).astype(mode.unsigned)
    epochs, offsets = total // unsigned(period), total % unsigned(period)
    return epoch + epochs.astype(mode.position_dtype), offsets.astype(mode.position_dtype)
