"""Tests for grainfn._src.index.backend: numpy or jax.numpy, chosen from the array."""

import subprocess
import sys

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


def test_deciding_does_not_import_jax() -> None:
    code = (
        "import numpy as np, sys\n"
        "from grainfn._src.index import backend\n"
        "backend.namespace(np.arange(3)); backend.is_jax_array(3)\n"
        "print('jax' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
