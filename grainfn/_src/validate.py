"""Argument checks shared by the combinators.

Every check raises with a message that names the bad value and what is allowed,
so that a user can fix the call without reading the source.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

SEED_LIMIT = 2**32


def check_seed(seed: Any, what: str = "seed") -> int:
    """Returns `seed` as an int after checking it lies in [0, 2**32).

    Examples:
        >>> check_seed(7)
        7
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be an integer in [0, 2**32), got -1.
    """
    if isinstance(seed, bool) or not _is_integer(seed):
        raise TypeError(f"{what} must be an integer in [0, 2**32), got {seed!r}.")
    seed = operator.index(seed)
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"{what} must be an integer in [0, 2**32), got {seed}.")
    return seed


def check_integer(value: Any, what: str) -> int:
    """Returns `value` as an int after checking that it is one (bools are not).

    Examples:
        >>> check_integer(3.0, "stop")
        Traceback (most recent call last):
        ...
        TypeError: stop must be an integer, got 3.0 of type float.
    """
    try:
        if not isinstance(value, bool):
            return operator.index(value)
    except TypeError:
        pass
    raise TypeError(f"{what} must be an integer, got {value!r} of type {type(value).__name__}.")


def check_nonnegative_int(value: Any, what: str) -> int:
    """Returns `value` as an int after checking that it is >= 0.

    Examples:
        >>> check_nonnegative_int(-2, "threads")
        Traceback (most recent call last):
        ...
        ValueError: threads must be an integer >= 0, got -2.
    """
    if isinstance(value, bool) or not _is_integer(value):
        raise TypeError(f"{what} must be an integer >= 0, got {value!r}.")
    value = operator.index(value)
    if value < 0:
        raise ValueError(f"{what} must be an integer >= 0, got {value}.")
    return value


def check_positive_int(value: Any, what: str) -> int:
    """Returns `value` as an int after checking that it is >= 1."""
    if isinstance(value, bool) or not _is_integer(value):
        raise TypeError(f"{what} must be a positive integer, got {value!r}.")
    value = operator.index(value)
    if value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value}.")
    return value


def check_callable(fn: Any, what: str) -> Callable[..., Any]:
    """Returns `fn` after checking that it can be called."""
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {fn!r} of type {type(fn).__name__}.")
    return fn


def check_weights(weights: Sequence[Any], count: int) -> tuple[float, ...]:
    """Returns mixing weights as floats: one per component, finite, > 0.

    Examples:
        >>> check_weights([1, 2.5], 2)
        (1.0, 2.5)
        >>> check_weights([1, -2], 2)
        Traceback (most recent call last):
        ...
        ValueError: weights must be finite and > 0, got -2 at position 1 of [1, -2].
    """
    weights = list(weights)
    if len(weights) != count:
        raise ValueError(
            f"weights must have one entry per dataset: got {len(weights)} weights "
            f"for {count} datasets."
        )
    result = []
    for position, weight in enumerate(weights):
        if isinstance(weight, bool) or (
            not isinstance(weight, (int, float)) and not _is_real(weight)
        ):
            raise TypeError(f"weights must be numbers, got {weight!r} at position {position}.")
        as_float = float(weight)
        if not math.isfinite(as_float) or as_float <= 0:
            raise ValueError(
                f"weights must be finite and > 0, got {weight!r} at position {position} of "
                f"{weights!r}."
            )
        result.append(as_float)
    return tuple(result)


def _is_integer(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _is_real(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
