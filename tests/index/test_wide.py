"""Tests for grainfn._src.index.wide: 64-bit arithmetic on pairs of uint32 words."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn._src.index import wide
from grainfn._src.index.wide import Wide

VALUES = [0, 1, 2**32 - 1, 2**32, 2**40 + 12345, 2**63 + 7, 2**64 - 1]


def words(values: list[int]) -> Wide:
    """`values` as a `Wide` pair of numpy uint32 arrays (arrays wrap without warnings)."""
    return Wide(
        np.array([v >> 32 for v in values], np.uint32),
        np.array([v % 2**32 for v in values], np.uint32),
    )


def ints(value: Wide) -> list[int]:
    return [int(h) * 2**32 + int(lo) for h, lo in zip(value.high.tolist(), value.low.tolist())]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(0, 2**32 - 1),
    b=st.integers(0, 2**32 - 1),
    small=st.integers(1, 2**24 - 1),
    large=st.integers(1, 2**32 - 1),
)
def test_two_word_arithmetic_equals_python_integers(a: int, b: int, small: int, large: int) -> None:
    high, low = wide.multiply(jnp.uint32(a), jnp.uint32(b))
    assert int(high) * 2**32 + int(low) == a * b
    value = (a * b) % 2**64
    high, low = jnp.uint32(value >> 32), jnp.uint32(value % 2**32)
    (qh, ql), r = wide.divmod_small(high, low, small)
    assert (int(qh) * 2**32 + int(ql), int(r)) == divmod(value, small)
    q, r = wide.divmod_low(high, low, large)
    assert (int(q), int(r)) == (value // large % 2**32, value % large)
    top, bottom = wide.add(high, low, jnp.uint32(b))
    assert int(top) * 2**32 + int(bottom) == (value + b) % 2**64
    top, bottom = wide.multiply_pair(high, low, jnp.uint32(small))
    assert int(top) * 2**32 + int(bottom) == (value * small) % 2**64


def test_widen_gives_a_zero_high_word_and_keeps_wide_values() -> None:
    low = np.array([5, 2**32 - 1], np.uint32)
    assert ints(wide.widen(low)) == [5, 2**32 - 1]
    pair = words([2**40])
    assert wide.widen(pair) is pair


def test_add_wide_and_scale_wrap_modulo_2_to_the_64() -> None:
    a, b = words(VALUES), words(VALUES[::-1])
    assert ints(wide.add_wide(a, b)) == [(x + y) % 2**64 for x, y in zip(VALUES, VALUES[::-1])]
    for factor in (0, 3, 2**32 + 1, 10**19):
        assert ints(wide.scale(a, factor)) == [v * factor % 2**64 for v in VALUES]
    low = np.array([3_000_000_000], np.uint32)
    assert ints(wide.scale(low, 10**10)) == [3 * 10**19 % 2**64]


def test_whole_joins_epoch_and_offset() -> None:
    epochs = np.array([0, 1, 2**32 - 1], np.uint32)
    offsets = words([5, 2**33, 7])
    length = 2**34
    assert ints(wide.whole(epochs, offsets, length)) == [
        (e * length + o) % 2**64 for e, o in zip([0, 1, 2**32 - 1], [5, 2**33, 7])
    ]
    endless = wide.whole(epochs, offsets, 2**63 - 1)
    assert ints(endless) == [5, 2**33, 7]


@pytest.mark.parametrize("length", [1, 7, 1000, 2**24 + 1, 3_000_000_019, 2**32, 3 * 2**40 + 7])
def test_split_wide_is_divmod_with_the_epoch_modulo_2_to_the_32(length: int) -> None:
    epoch, offset = wide.split_wide(words(VALUES), length)
    assert epoch.tolist() == [v // length % 2**32 for v in VALUES]
    assert ints(offset) == [v % length for v in VALUES]


def test_divmod_small_refuses_divisors_outside_its_range() -> None:
    for divisor in (0, 2**24):
        with pytest.raises(ValueError, match=f"divisor in \\[1, 2\\*\\*24\\), got {divisor}"):
            wide.divmod_small(np.uint32(0), np.uint32(5), divisor)
