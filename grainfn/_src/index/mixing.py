"""Index math of mix and concatenate: which component serves each position.

Mixing interleaves components in fixed integer proportions: position `k` of the
mix goes to the component whose running share first differs between `k` and
`k + 1`. The rule is Grain's, so mixes agree element for element.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grainfn._src.index.backend import namespace

_INT64_MAX = 2**63 - 1


def int_proportions(weights: Sequence[float]) -> tuple[int, ...]:
    """Scales weights so that the smallest is 100 and truncates them to ints.

    Examples:
        >>> int_proportions([1.0, 2.5])
        (100, 250)
    """
    scale = 100 / min(weights)
    return tuple(int(w * scale) for w in weights)


def mix_length(lengths: Sequence[int], proportions: Sequence[int]) -> int:
    """Length of a mix: the point where the first component runs out.

    Examples:
        >>> mix_length([5, 3], [100, 100])
        6
    """
    total = sum(proportions)
    return min(sys.maxsize, int(min(n / (p / total) for n, p in zip(lengths, proportions))))


def mix_index(k: int, proportions: Sequence[int]) -> tuple[int, int]:
    """Returns `(component, index in component)` for position `k` of a mix.

    Examples:
        >>> [mix_index(k, (100, 100)) for k in range(4)]
        [(0, 0), (1, 0), (0, 1), (1, 1)]
    """
    remaining = sum(proportions)
    k0, k1 = k, k + 1
    for component, p in enumerate(proportions):
        next_k0 = (k0 * (remaining - p)) // remaining
        next_k1 = (k1 * (remaining - p)) // remaining
        taken = k1 - next_k1
        if k0 - next_k0 != taken:
            return component, taken - 1
        remaining -= p
        k0, k1 = next_k0, next_k1
    raise AssertionError(f"mix_index found no component for position {k} of {proportions}")


def mix_indices(indices: Any, proportions: Sequence[int]) -> tuple[Any, Any]:
    """Vectorized `mix_index` over an int array (numpy or jax).

    Returns:
        Two arrays shaped like `indices`: the component of each position and
        the index within that component.

    Examples:
        >>> components, keys = mix_indices(np.arange(5), (100, 200))
        >>> components.tolist(), keys.tolist()
        ([0, 1, 1, 0, 1], [0, 0, 1, 1, 2])
    """
    xp = namespace(indices)
    total = sum(proportions)
    if xp is np and indices.size and int(indices.max()) + 1 > _INT64_MAX // total:
        pairs = [mix_index(int(k), proportions) for k in indices.ravel().tolist()]
        components = np.array([c for c, _ in pairs], dtype=np.int64).reshape(indices.shape)
        keys = np.array([key for _, key in pairs], dtype=np.int64).reshape(indices.shape)
        return components, keys
    remaining = total
    k0, k1 = indices, indices + 1
    components = xp.full(indices.shape, len(proportions) - 1, dtype=indices.dtype)
    keys = xp.zeros_like(indices)
    found = xp.zeros(indices.shape, dtype=bool)
    for component, p in enumerate(proportions):
        next_k0 = (k0 * (remaining - p)) // remaining
        next_k1 = (k1 * (remaining - p)) // remaining
        taken = k1 - next_k1
        here = (k0 - next_k0 != taken) & ~found
        components = xp.where(here, component, components)
        keys = xp.where(here, taken - 1, keys)
        found = found | here
        remaining -= p
        k0, k1 = next_k0, next_k1
    return components, keys


def concat_indices(indices: Any, lengths: Sequence[int]) -> tuple[Any, Any]:
    """Returns `(component, index in component)` for positions of a concatenation.

    Epoch `e` of the concatenation reads epoch `e` of every component.

    Examples:
        >>> components, keys = concat_indices(np.arange(7), [2, 3])
        >>> components.tolist(), keys.tolist()
        ([0, 0, 1, 1, 1, 0, 0], [0, 1, 0, 1, 2, 2, 3])
    """
    xp = namespace(indices)
    total = sum(lengths)
    starts = xp.asarray(np.cumsum([0, *lengths])[:-1])
    sizes = xp.asarray(np.asarray(lengths, dtype=np.int64))
    epoch, offset = indices // total, indices % total
    components = xp.searchsorted(starts, offset, side="right") - 1
    # Empty components share a start with the next one; searchsorted's "right"
    # picks the last of equal starts, which is the non-empty one.
    keys = offset - starts[components] + epoch * sizes[components]
    return components, keys


_PATTERN_TABLE_LIMIT = 1 << 16


@functools.lru_cache(maxsize=64)
def mix_pattern(proportions: tuple[int, ...]) -> Callable[[int], int]:
    """A fast `k -> component of position k` for one mix.

    The component sequence repeats every `sum(proportions)` positions (each
    floor in `mix_index` shifts by a whole number over one period), so for
    periods up to 65536 one period is tabulated once.

    Examples:
        >>> pattern = mix_pattern((100, 200))
        >>> [pattern(k) for k in range(6)] == [mix_index(k, (100, 200))[0] for k in range(6)]
        True
    """
    period = sum(proportions)
    if period > _PATTERN_TABLE_LIMIT:
        return lambda k: mix_index(k, proportions)[0]
    table = mix_indices(np.arange(period, dtype=np.int64), proportions)[0].tolist()
    return lambda k: table[k % period]
