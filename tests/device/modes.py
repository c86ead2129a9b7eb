"""The integer mode a device test runs a pipeline in (shared by the tests of tests/device)."""

from __future__ import annotations

import contextlib
from typing import Any

import jax

from grainfn import fn


def exact_mode(ds: Any) -> Any:
    """The integer mode `to_jax(ds).step` runs in: 32-bit, or 64-bit where 32 bits are refused."""
    try:
        fn.to_jax(ds).init()
    except OverflowError:
        return jax.enable_x64(True)
    return contextlib.nullcontext()
