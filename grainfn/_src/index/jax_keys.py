"""The `jax.random` keys of `random_map(..., rng="jax")`: one rule on host and device.

The key of position `epoch * length + offset` of a stage with `seed` is the
seed's key (`seed_key`) folded with the epoch (mod 2**32), then with the
offset's high and low 32-bit words (`element_key`). It depends on the seed
and the position alone: the same in any process, worker, device or resumed
run, and in both of jax's integer modes. The device computes it from its
(epoch, offset) form of positions; the host (`JaxKeys`) from the index.
jax is imported on first use.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

KEY_IMPL = "threefry2x32"
"""The PRNG of random_map's keys, whatever `jax_default_prng_impl` says (see `seed_key`)."""

KEY_SEED_LIMIT = 2**64
"""A jax key holds a seed below 2**64 (an op seed is below `seeds.SEED_LIMIT`, 2**32)."""


def seed_key(seed: int) -> Any:
    """`jax.random.key(seed)` as jax computes it with 64-bit integers, in both modes.

    Always a threefry2x32 key, of the seed's high and low 32-bit words
    (`jax.random.key` in 32-bit mode would drop the high word of a seed past
    2**32), whatever `jax_default_prng_impl` says. With 'rbg' or
    'unsafe_rbg', jax draws the bits of a vmapped batch of keys from its first
    key, so an element's draws would depend on which positions are read with
    it (on device, a batch; on the host, one element at a time); and
    unsafe_rbg's `fold_in` gives other keys with 64-bit integers. A
    threefry2x32 key draws the same bits alone or in any batch, in both
    integer modes. The setting still rules every key the program makes itself.
    """
    import jax

    words = jax.numpy.asarray([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)
    return jax.random.wrap_key_data(words, impl=KEY_IMPL)


def element_key(seed: int, epoch: Any, high: Any, low: Any) -> Any:
    """The key of the element at `epoch`, offset `high * 2**32 + low` (uint32 words, traceable)."""
    import jax

    key = jax.random.fold_in(seed_key(seed), epoch)
    key = jax.random.fold_in(key, high)
    return jax.random.fold_in(key, low)


class JaxKeys:
    """The host's keys of a `random_map(..., rng="jax")` stage of `length` (`sys.maxsize`: endless).

    `at(index)` is the key `to_jax` gives position `index` on device. Keys
    are computed by one jitted jax function on the host's CPU.

    Examples:
        >>> keys = JaxKeys(seed=3, length=10)
        >>> import jax
        >>> bool((jax.random.key_data(keys.at(12)) == jax.random.key_data(keys.at(12))).all())
        True
    """

    def __init__(self, seed: int, length: int) -> None:
        self.seed, self.length = seed, length
        self._compute: Any = None

    def at(self, index: int) -> Any:
        """The key of position `index` of the stage."""
        if self._compute is None:
            import jax

            self._compute = jax.jit(lambda e, h, w: element_key(self.seed, e, h, w))
        if self.length >= sys.maxsize:  # endless: every position lies in epoch 0
            epoch, offset = 0, index
        else:
            epoch, offset = divmod(index, self.length)
        words = np.uint32(epoch % 2**32), np.uint32(offset >> 32), np.uint32(offset & 0xFFFFFFFF)
        return self._compute(*words)

    def __reduce__(self) -> tuple[Any, ...]:
        return (JaxKeys, (self.seed, self.length))

    def __repr__(self) -> str:
        return f"JaxKeys(seed={self.seed}, length={self.length})"
