"""Per-element random number generators for `random_map`.

The generator handed to element `i` of a stage with seed `s` is a Philox
generator keyed by `s` whose counter starts at `[0, 0, 0, i]`. Its draws depend
only on `(s, i)`: the same in any process, worker, thread or resumed run, and
the same as Grain's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np


class ElementRng:
    """Hands out the generator of element `index`, reusing one per thread.

    Building a Philox generator costs far more than resetting one, so each
    thread keeps a single generator and rewinds it for every element.

    Examples:
        >>> rngs = ElementRng(seed=3)
        >>> a = rngs.at(5).integers(1000)
        >>> b = rngs.at(6).integers(1000)
        >>> bool(a == rngs.at(5).integers(1000))
        True
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._key = np.random.SeedSequence(seed).generate_state(2, dtype=np.uint64)
        self._local = threading.local()

    def at(self, index: int) -> np.random.Generator:
        """Returns this thread's generator, rewound to the start of element `index`."""
        local = self._local
        try:
            generator, state = local.generator, local.state
        except AttributeError:
            generator = np.random.Generator(np.random.Philox(key=self._key))
            state = generator.bit_generator.state
            local.generator, local.state = generator, state
        # `rewind`, inline: this runs once per element of every random_map.
        state["state"]["counter"] = np.array([0, 0, 0, index], dtype=np.uint64)
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        generator.bit_generator.state = state
        return generator

    def __reduce__(self) -> tuple[Any, ...]:
        return (ElementRng, (self.seed,))

    def __repr__(self) -> str:
        return f"ElementRng(seed={self.seed})"


def rewind(generator: np.random.Generator, index: int, op_seed: int = 0, state: Any = None) -> None:
    """Sets a Philox generator to the start of element `index` of the stage `op_seed`.

    Its counter becomes `[0, 0, op_seed, index]`, with nothing buffered: the
    draws then depend on its key, `op_seed` and `index` alone (Grain's rule).

    Examples:
        >>> generator = np.random.Generator(np.random.Philox(7))
        >>> rewind(generator, 3)
        >>> first = generator.integers(1000)
        >>> rewind(generator, 3)
        >>> bool(generator.integers(1000) == first)
        True
    """
    state = generator.bit_generator.state
    state["state"]["counter"] = np.array([0, 0, op_seed, index], dtype=np.uint64)
    state["buffer_pos"] = 4
    state["has_uint32"] = 0
    generator.bit_generator.state = state
