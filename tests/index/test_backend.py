"""Tests for grainfn._src.index.backend: numpy or jax.numpy, chosen from the array.

That deciding imports no jax is checked with `import grainfn` (tests/test_package.py).
"""

import numpy as np

from grainfn._src.index import backend


def test_numpy_and_python_values_get_numpy() -> None:
    for value in (np.arange(3), np.int64(4), 5, [1, 2]):
        assert backend.namespace(value) is np
        assert not backend.is_jax_array(value)


def test_jax_arrays_and_tracers_get_jax_numpy() -> None:
    import jax
    import jax.numpy as jnp

    assert backend.is_jax_array(jnp.arange(3))
    assert backend.namespace(jnp.arange(3)) is jnp
    seen = []
    jax.jit(lambda x: seen.append(backend.namespace(x)) or x)(jnp.arange(3))
    assert seen == [jnp]
