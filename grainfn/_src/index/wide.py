"""Exact 64-bit unsigned arithmetic on pairs of uint32 words, for 32-bit jax.

With `jax_enable_x64` off, a position past 2**32 - 1 is carried as a `Wide`
pair of words: what the stages of endless pipelines (repeat, batch, mix,
map, random_map) and the mix's whole positions need: products, sums, and
division by a static length into (epoch mod 2**32, offset).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

_U32 = np.uint32
_WORD = 1 << 32
_INFINITE = (1 << 63) - 1  # the length of an endless dataset (sys.maxsize)


class Wide(NamedTuple):
    """An unsigned 64-bit value as two uint32 words: `high * 2**32 + low`."""

    high: Any
    low: Any


def widen(value: Any) -> Wide:
    """A uint32 value (or a `Wide` one, returned as is) as a `Wide` pair."""
    if isinstance(value, Wide):
        return value
    return Wide(value * _U32(0), value)


def multiply(a: Any, b: Any) -> Wide:
    """`a * b` of two uint32 values, as a (high, low) pair.

    Examples:
        >>> import jax.numpy as jnp
        >>> high, low = multiply(jnp.uint32(2**32 - 1), jnp.uint32(2**32 - 1))
        >>> int(high) * 2**32 + int(low) == (2**32 - 1) ** 2
        True
    """
    mask = _U32(0xFFFF)
    a0, a1, b0, b1 = a & mask, a >> 16, b & mask, b >> 16
    low_low, high_high = a0 * b0, a1 * b1
    middle = a0 * b1
    middle_sum = middle + a1 * b0
    middle_carry = (middle_sum < middle).astype(_U32)  # the middle sum passed 2**32
    low = low_low + (middle_sum << 16)
    low_carry = (low < low_low).astype(_U32)
    high = high_high + (middle_sum >> 16) + (middle_carry << 16) + low_carry
    return Wide(high, low)


def add(high: Any, low: Any, value: Any) -> Wide:
    """`(high, low) + value` for a uint32 `value`, modulo 2**64."""
    total = low + value
    return Wide(high + (total < low).astype(_U32), total)


def add_wide(a: Wide, b: Wide) -> Wide:
    """`a + b` modulo 2**64."""
    high, low = add(a.high, a.low, b.low)
    return Wide(high + b.high, low)


def multiply_pair(high: Any, low: Any, factor: Any) -> Wide:
    """`(high, low) * factor` for a uint32 `factor`, modulo 2**64."""
    product_high, product_low = multiply(low, factor)
    return Wide(high * factor + product_high, product_low)


def scale(value: Any, factor: int) -> Wide:
    """`value * factor` modulo 2**64, for a uint32 or `Wide` value and a static `factor` < 2**64.

    Examples:
        >>> import jax.numpy as jnp
        >>> high, low = scale(jnp.uint32(3_000_000_000), 10**10)
        >>> int(high) * 2**32 + int(low) == 3 * 10**19 % 2**64
        True
    """
    value = widen(value)
    factor_high, factor_low = divmod(factor % (_WORD * _WORD), _WORD)
    product = multiply_pair(value.high, value.low, _U32(factor_low))
    return Wide(product.high + value.low * _U32(factor_high), product.low)


def whole(epoch: Any, offset: Any, length: int) -> Wide:
    """`epoch * length + offset` as a `Wide` pair: a whole position from its (epoch, offset).

    `offset` is a uint32 or a `Wide` value; an infinite `length`
    (`sys.maxsize`) has only epoch 0, so the offset is the position.
    """
    if length >= _INFINITE:  # every position of an endless stage lies in its epoch 0
        return widen(offset)
    return add_wide(scale(epoch, length), widen(offset))


def split_wide(value: Wide, length: int) -> tuple[Any, Wide]:
    """`(value // length mod 2**32, value % length)` for a static `length` in [1, 2**64).

    Examples:
        >>> import jax.numpy as jnp
        >>> value, length = 2**63 + 12345, 3 * 2**40 + 7
        >>> words = Wide(jnp.uint32(value >> 32), jnp.uint32(value % 2**32))
        >>> q, (rh, rl) = split_wide(words, length)
        >>> (int(q), int(rh) * 2**32 + int(rl)) == (value // length % 2**32, value % length)
        True
    """
    if length < _WORD:
        quotient, remainder = divmod_low(value.high, value.low, length)
        return quotient, widen(remainder)
    divisor = Wide(_U32(length >> 32), _U32(length % _WORD))
    remainder = quotient = widen(value.high * _U32(0))
    quotient = quotient.low
    for word in (value.high, value.low):  # bit by bit; the remainder stays below the divisor
        for shift in range(31, -1, -1):
            overflow = remainder.high >> 31  # doubling passes 2**64: then it exceeds the divisor
            bit = (word >> shift) & _U32(1)
            high = (remainder.high << 1) | (remainder.low >> 31)
            remainder = Wide(high, (remainder.low << 1) | bit)
            subtract = (overflow == 1) | _at_least(remainder, divisor)
            remainder = _subtract_where(remainder, divisor, subtract)
            quotient = (quotient << 1) | subtract.astype(_U32)
    return quotient, remainder


def _at_least(a: Wide, b: Wide) -> Any:
    return (a.high > b.high) | ((a.high == b.high) & (a.low >= b.low))


def _subtract_where(a: Wide, b: Wide, condition: Any) -> Wide:
    """`a - b` (modulo 2**64) where `condition`, else `a`."""
    mask = condition.astype(_U32) * _U32(0xFFFFFFFF)
    low, high = b.low & mask, b.high & mask
    borrow = (a.low < low).astype(_U32)
    return Wide(a.high - high - borrow, a.low - low)


def divmod_small(high: Any, low: Any, divisor: int) -> tuple[Wide, Any]:
    """`divmod((high, low), divisor)` for a static divisor below 2**24, a byte at a time.

    Examples:
        >>> import jax.numpy as jnp
        >>> value = 2**40 + 12345
        >>> (qh, ql), r = divmod_small(jnp.uint32(value >> 32), jnp.uint32(value % 2**32), 1000)
        >>> (int(qh) * 2**32 + int(ql), int(r)) == divmod(value, 1000)
        True
    """
    if not 0 < divisor < 1 << 24:
        raise ValueError(f"divmod_small takes a divisor in [1, 2**24), got {divisor}.")
    d = _U32(divisor)
    remainder = high * _U32(0)
    quotient_high = quotient_low = remainder
    for word in (high, low):
        for shift in (24, 16, 8, 0):
            current = (remainder << 8) | ((word >> shift) & _U32(0xFF))  # < divisor * 256
            digit, remainder = current // d, current % d
            quotient_high = (quotient_high << 8) | (quotient_low >> 24)
            quotient_low = (quotient_low << 8) | digit
    return Wide(quotient_high, quotient_low), remainder


def divmod_low(high: Any, low: Any, divisor: int) -> tuple[Any, Any]:
    """`(quotient mod 2**32, remainder)` of `(high, low) / divisor` for a static uint32 divisor.

    Examples:
        >>> import jax.numpy as jnp
        >>> value, d = 2**50 + 987654321, 3_000_000_019
        >>> q, r = divmod_low(jnp.uint32(value >> 32), jnp.uint32(value % 2**32), d)
        >>> (int(q), int(r)) == (value // d % 2**32, value % d)
        True
    """
    if divisor < 1 << 24:
        (_, quotient), remainder = divmod_small(high, low, divisor)
        return quotient, remainder
    d = _U32(divisor)
    remainder = quotient = high * _U32(0)
    for word in (high, low):  # bit by bit; the remainder stays below the divisor
        for shift in range(31, -1, -1):
            overflow = remainder >> 31  # doubling passes 2**32: then it exceeds the divisor
            remainder = (remainder << 1) | ((word >> shift) & _U32(1))
            subtract = (overflow == 1) | (remainder >= d)
            remainder = remainder - d * subtract.astype(_U32)  # wraps back into range
            quotient = (quotient << 1) | subtract.astype(_U32)
    return quotient, remainder
