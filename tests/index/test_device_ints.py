"""Tests for grainfn._src.index.device_ints: integer modes and the (epoch, offset) form."""

from types import SimpleNamespace

import jax
import numpy as np
import pytest

from grainfn._src.index import device_ints
from grainfn._src.index.device_ints import IntMode, Split, UnrepresentableError
from grainfn._src.index.slicing import MAX_POSITION
from grainfn._src.index.wide import Wide

M32, M64 = IntMode(32), IntMode(64)


def test_modes_name_their_dtypes_and_limits() -> None:
    assert (M32.position_dtype, M32.unsigned) == (np.dtype(np.int32), np.dtype(np.uint32))
    assert (M64.position_dtype, M64.unsigned) == (np.dtype(np.int64), np.dtype(np.uint64))
    assert (M32.top, M32.limit) == (2**31 - 1, 2**32)
    assert (M64.top, M64.limit) == (2**63 - 1, 2**64)


def test_constants_wrap_modulo_the_mode() -> None:
    assert M32.constant(2**32 + 5) == 5
    assert M32.constant(-1) == 2**32 - 1
    assert M32.constant(3).dtype == np.uint32
    assert M64.constant(2**40).dtype == np.uint64


def test_current_mode_follows_jax_enable_x64() -> None:
    with jax.enable_x64(False):
        assert device_ints.current_mode() == M32
    with jax.enable_x64(True):
        assert device_ints.current_mode() == M64


def test_require_names_the_stage_the_overflow_and_the_way_out() -> None:
    device_ints.require(True, "batch(2)", "never shown", M32)
    with pytest.raises(UnrepresentableError, match=r"batch\(2\) exactly with 32-bit.*x64"):
        device_ints.require(False, "batch(2)", "its positions reach 2**40", M32)
    with pytest.raises(OverflowError, match=r"64-bit integers: big\. This passes 2\*\*64"):
        device_ints.require(False, "mix", "big", M64)


def test_bounds_of_epochs_offsets_and_parents() -> None:
    assert device_ints.epoch_bound(5, 12) == 2
    assert device_ints.epoch_bound(0, 12) == 0
    assert device_ints.offset_bound(5, 12) == 4
    assert device_ints.offset_bound(50, 12) == 12
    assert device_ints.parent_bound(5, 12, 10) == 29
    assert device_ints.parent_bound(1, 2**62, 2**62) == MAX_POSITION


def test_offsets_are_wide_only_when_they_pass_the_mode() -> None:
    assert not device_ints.wide_offsets(M32, 10, 2**40)
    assert device_ints.wide_offsets(M32, 2**33, 2**40)
    assert not device_ints.wide_offsets(M32, 2**33, 100)  # asked only below 2**32
    assert not device_ints.wide_offsets(M64, 2**33, 2**40)


def test_split_divides_a_position_by_the_length() -> None:
    epoch, offset = device_ints.split(M32, np.uint32(23), 10, 100)
    assert (int(epoch), int(offset)) == (2, 3)
    epoch, offset = device_ints.split(M32, np.uint32(7), 10, 9)  # statically in epoch 0
    assert (int(epoch), int(offset)) == (0, 7)


def test_split_of_wide_positions() -> None:
    position = 3 * (2**33 + 1) + 12
    wide = Wide(np.uint32(position >> 32), np.uint32(position % 2**32))
    epoch, offset = device_ints.split(M32, wide, 2**33 + 1, 2**40)
    assert isinstance(offset, Wide)
    assert (int(epoch), int(offset.high) * 2**32 + int(offset.low)) == (3, 12)
    endless = device_ints.split(M32, wide, MAX_POSITION, 2**40)
    assert int(endless.epoch) == 0 and endless.offset is wide


def test_whole_position_is_exact_or_refused_ahead_of_time() -> None:
    ds = SimpleNamespace(length=10, describe_stage=lambda: "range(10)")
    assert device_ints.whole_position(M32, ds, 9)(Split(np.uint32(0), np.uint32(4))) == 4
    whole = device_ints.whole_position(M32, ds, 10**9)
    assert whole(Split(np.uint32(3), np.uint32(4))) == 34
    with pytest.raises(UnrepresentableError, match=r"range\(10\).*positions reach 4294967296"):
        device_ints.whole_position(M32, ds, 2**32)
