"""What a compiled program depends on in a pipeline: a key, equal for pipelines built again.

`to_jax` of a pipeline built again (by a build function called once per
run, or per restart) should reuse the program `jax.jit` compiled for the
first: a program is tens of MB of compile time and memory. Its arrays are
the program's arguments, never part of it; its functions are, and a lambda
made again is a new object. `pipeline_key` keys a pipeline by what the
program computes where that is safe to tell, and by identity elsewhere.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any


def pipeline_key(value: Any) -> Any:
    """What a compiled program depends on in a pipeline: equal keys give the same program.

    A stage's compared dataclass fields, recursively; an array by its shape and
    dtype (arrays are the program's arguments, never part of it); a Python
    function by what it computes where that is safe to tell (`function_key`);
    another object by identity, unless it hashes by value.

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> def build():
        ...     return fn.batch(2, fn.shuffle(fn.source(np.zeros((8, 3))), seed=1))
        >>> pipeline_key(build()) == pipeline_key(build())
        True
        >>> pipeline_key(build()) == pipeline_key(fn.shuffle(fn.range(8), seed=1))
        False
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if f.compare]
        return (type(value), tuple(pipeline_key(getattr(value, name)) for name in fields))
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return ("array", tuple(value.shape), str(value.dtype))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(pipeline_key(item) for item in value))
    if isinstance(value, dict):
        return (dict, tuple((key, pipeline_key(item)) for key, item in value.items()))
    if isinstance(value, types.FunctionType):
        return function_key(value)
    if callable(value):
        return ("object", id(value))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return (type(value), value)


_CONSTANTS = (int, float, complex, str, bytes, bool, type(None))


def function_key(function: types.FunctionType, depth: int = 0) -> Any:
    """A function by its code and what it closes over, where each is a constant; else by identity.

    A lambda or a nested function made again by each call of a build function
    is a new object with the same code: keyed by identity, each rebuild of the
    pipeline would compile (and keep) a program of its own. Its code, its
    module, and the values of its closure and defaults decide what it
    computes, where those are constants (numbers, strings, None, tuples of
    them) or such functions; a function that closes over anything else (an
    array jax would fold into the program, a mutable object) keeps its
    identity.

    Examples:
        >>> def scaled(k):
        ...     return lambda x: x * k
        >>> function_key(scaled(2)) == function_key(scaled(2))
        True
        >>> function_key(scaled(2)) == function_key(scaled(3))
        False
    """
    try:
        closure = tuple(cell.cell_contents for cell in function.__closure__ or ())
    except ValueError:  # a cell not filled yet
        return ("object", id(function))
    kwdefaults = tuple(sorted((function.__kwdefaults__ or {}).items()))
    captured = (closure, function.__defaults__ or (), kwdefaults)
    values = _constant_key(captured, depth)
    if values is None:
        return ("object", id(function))
    # The module's globals by identity: the function holds them, so the identity stays theirs.
    return ("function", function.__code__, id(function.__globals__), values)


def _constant_key(value: Any, depth: int) -> Any:
    """`value` as a key when it is a constant (typed: 1, 1.0 and True differ), else None."""
    if isinstance(value, tuple):
        items = [_constant_key(item, depth) for item in value]
        return None if any(item is None for item in items) else ("tuple", tuple(items))
    if type(value) in _CONSTANTS:
        return (type(value), value)
    if isinstance(value, types.FunctionType) and depth < 3:  # a helper it calls
        key = function_key(value, depth + 1)
        return key if key[0] == "function" else None
    return None
