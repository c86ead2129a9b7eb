"""Exact 64-bit unsigned arithmetic on pairs of uint32 words, for 32-bit jax.

Only what the mix needs when its positions pass 2**32 with `jax_enable_x64`
off: `epoch * length + offset`, division by its pattern's period, and the split
of a component position into (epoch mod 2**32, offset). A value is `(high, low)`
with `value = high * 2**32 + low`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_U32 = np.uint32


def multiply(a: Any, b: Any) -> tuple[Any, Any]:
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
    return high, low


def add(high: Any, low: Any, value: Any) -> tuple[Any, Any]:
    """`(high, low) + value` for a uint32 `value`."""
    total = low + value
    return high + (total < low).astype(_U32), total


def multiply_pair(high: Any, low: Any, factor: Any) -> tuple[Any, Any]:
    """`(high, low) * factor` for a uint32 `factor`, modulo 2**64."""
    product_high, product_low = multiply(low, factor)
    return high * factor + product_high, product_low


def divmod_small(high: Any, low: Any, divisor: int) -> tuple[tuple[Any, Any], Any]:
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
    return (quotient_high, quotient_low), remainder


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
