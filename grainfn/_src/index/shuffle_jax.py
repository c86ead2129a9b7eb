"""The shuffle bijection on jax arrays: `shuffle_indices` of jax input, and `permute_jax`.

The same cipher (`grainfn._src.index.cipher`), keys and cycle walking as
`grainfn._src.index.shuffle`, traceable under `jax.jit` and `jax.vmap`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from grainfn._src.index.cipher import SEED_SEQ_INIT, array_keys, block_bits, encrypt


def shuffle_jax(indices: Any, length: int, seed: int) -> Any:
    """`shuffle_indices` of a jax array (checked length and seed), traced or not."""
    import jax
    import jax.numpy as jnp

    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(f"indices must be integers, got dtype {indices.dtype}.")
    bits = block_bits(length - 1)
    if bits > 32 and jax.dtypes.canonicalize_dtype(np.uint64) != np.uint64:
        raise ValueError(
            f"length {length} needs a {bits}-bit shuffle block, but jax runs in 32-bit mode; "
            "enable 64-bit mode with jax.config.update('jax_enable_x64', True)."
        )
    if length - 1 > jnp.iinfo(indices.dtype).max:
        raise ValueError(
            f"length {length} does not fit in indices of dtype {indices.dtype}; "
            "use a wider dtype (64-bit needs jax_enable_x64)."
        )
    if not isinstance(indices, jax.core.Tracer) and indices.size:
        low = int(indices.min())
        if low < 0:
            raise ValueError(f"indices must be >= 0, got {low}.")
    return _jax_kernel()(indices, length, seed)


@functools.cache
def _jax_kernel() -> Callable[[Any, int, int], Any]:
    import jax
    import jax.numpy as jnp

    def kernel(indices: Any, length: int, seed: int) -> Any:
        if length == 1:
            return indices
        bits = block_bits(length - 1)
        index_dtype = np.uint64 if indices.dtype.itemsize == 8 else np.uint32
        positions = indices.astype(index_dtype)
        epoch = base = jnp.zeros_like(positions)
        if length <= np.iinfo(index_dtype).max:  # else (length 2**32, uint32) all in epoch 0
            epoch = positions // index_dtype(length)
            base = epoch * index_dtype(length)
        seeds = epoch.astype(np.uint32) + np.uint32(seed)
        offsets = (positions - base).astype(np.uint32 if bits <= 32 else np.uint64)
        value = permute_jax(offsets, length, seeds)
        return (value.astype(index_dtype) + base).astype(indices.dtype)

    return jax.jit(kernel, static_argnums=(1, 2))


def permute_jax(offsets: Any, length: int, seeds: Any) -> Any:
    """The shuffle bijection of [0, length) on jax offsets, with one uint32 seed per offset.

    The jax form of one epoch of `shuffle_indices`: traceable under `jax.jit`
    and `jax.vmap`, scalars included.

    Args:
        offsets: Unsigned jax integers in [0, length), of a dtype that holds
            the shuffle block (uint32 for lengths up to 2**32, else uint64).
            Larger ones are read as `length - 1`.
        length: The number of positions permuted, in [1, 2**63 - 1].
        seeds: uint32 seeds broadcastable to `offsets`: `(seed + epoch) mod 2**32`.

    Returns:
        The permuted offsets, of the dtype of `offsets`.
    """
    import jax
    import jax.numpy as jnp

    if length == 1:
        return jnp.zeros_like(offsets)
    w = block_bits(length - 1) // 2
    limit = np.dtype(offsets.dtype).type(length - 1)
    seeds = jnp.broadcast_to(jnp.asarray(seeds, np.uint32), jnp.shape(offsets))
    keys = array_keys(seeds, jnp.full(seeds.shape, SEED_SEQ_INIT, np.uint32), w)
    # An offset outside [0, length) (a branch computed but not taken) could start a
    # cycle that never comes back into range: clamp it, so that the loop always ends.
    offsets = jnp.minimum(offsets, limit)
    return jax.lax.while_loop(  # cycle walking: encrypt again until inside [0, length)
        lambda v: jnp.any(v > limit),
        lambda v: jnp.where(v > limit, encrypt(v, w, keys), v),
        encrypt(offsets, w, keys),
    )
