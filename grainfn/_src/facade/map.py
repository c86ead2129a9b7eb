"""Grain's `map` transformation module's `RngPool`: the generators `random_map` hands out.

The map stages themselves are methods of the datasets (`map`, `random_map`,
`map_with_index`).
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import numpy as np

from grainfn._src.core import validate
from grainfn._src.index.rng import rewind

T = TypeVar("T")


class RngPool:
    """Philox generators keyed by `seed`, handed out at the start of any element's draws.

    `acquire_rng(index, op_seed=s)` gives the generator `random_map` hands to
    element `index` of a stage seeded `s` (the same draws as Grain's); give it
    back with `release_rng` to reuse it.

    Examples:
        >>> pool = RngPool(seed=4)
        >>> rng = pool.acquire_rng(7)
        >>> first = rng.integers(1000)
        >>> pool.release_rng(rng)
        >>> bool(pool.acquire_rng(7).integers(1000) == first)
        True
    """

    def __init__(self, seed: int) -> None:
        self._seed = validate.check_nonnegative_int(seed, "seed")
        self._free: list[np.random.Generator] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return (RngPool, (self._seed,))

    def acquire_rng(self, index: int, *, op_seed: int = 0) -> np.random.Generator:
        """A generator at the start of element `index`'s draws for the stage `op_seed`."""
        with self._lock:
            rng = self._free.pop() if self._free else None
        if rng is None:
            rng = np.random.Generator(np.random.Philox(self._seed))
        rewind(rng, validate.check_nonnegative_int(index, "index"), op_seed)
        return rng

    def release_rng(self, rng: np.random.Generator) -> None:
        """Gives a generator back for the next `acquire_rng`."""
        with self._lock:
            self._free.append(rng)
