"""Choosing the array namespace (numpy or jax.numpy) for index math.

The index functions are written once over array operators. They run on numpy
int64 arrays on the hot path and on jax arrays, traced or not, under `jax.jit`.
jax is only imported when a jax array is passed in, so `import grainfn` never
imports it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np


def is_jax_array(x: Any) -> bool:
    """Whether `x` is a jax array or tracer, decided without importing jax."""
    return type(x).__module__.startswith("jax")


def namespace(x: Any) -> ModuleType:
    """Returns `jax.numpy` for jax arrays and `numpy` for everything else.

    Examples:
        >>> namespace(np.arange(3)).__name__
        'numpy'
    """
    if is_jax_array(x):
        import jax.numpy as jnp

        return jnp
    return np
