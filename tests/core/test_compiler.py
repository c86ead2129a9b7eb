"""The compiler of map-level pipelines for to_jax: programs, collected arrays, refusals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.compiler import (
    Compiler,
    NotOnDeviceError,
    Program,
    call_traced,
    device_array,
)
from grainfn._src.core.validate import UserStopIterationError
from grainfn._src.index.device_ints import IntMode, Split

ROWS = Program(lambda arrays, at: at.offset, lambda arrays, row: arrays[0][row])


def test_a_program_resolves_then_reads() -> None:
    table = [np.array([10, 11, 12])]
    assert int(ROWS(table, Split(0, 1))) == 11
    assert ROWS.resolve(table, Split(0, 2)) == 2  # the index math alone
    backwards = ROWS.at(lambda arrays, at: Split(at.epoch, 2 - at.offset))
    assert int(backwards(table, Split(0, 0))) == 12
    doubled = backwards.then(lambda arrays, x: 2 * x)
    assert int(doubled(table, Split(0, 0))) == 24
    assert doubled.resolve(table, Split(0, 0)) == Split(0, 2).offset


def test_the_compiler_keeps_each_array_once() -> None:
    compiler = Compiler(IntMode(32))
    a, b = np.arange(3), np.arange(3)
    assert [compiler.add(a), compiler.add(b), compiler.add(a)] == [0, 1, 0]
    assert compiler.arrays[0] is a and len(compiler.arrays) == 2


def test_compile_gives_the_hosts_elements() -> None:
    ds = fn.map(lambda x: x * 2, fn.slice(slice(None, None, -1), fn.range(10)))
    compiler = Compiler(IntMode(32))
    program = compiler.compile(ds, ds.length - 1)
    offsets = jnp.arange(10, dtype=jnp.uint32)
    got = jax.vmap(lambda i: program(compiler.arrays, Split(jnp.uint32(0), i)))(offsets)
    assert got.tolist() == [ds.get(i) for i in range(10)]


def test_a_stage_without_a_device_form_or_elements_is_refused_by_name() -> None:
    compiler = Compiler(IntMode(32))
    with pytest.raises(NotOnDeviceError, match=r"cannot run the stage 'filter\(bool\)'"):
        compiler.compile(fn.filter(bool, fn.range(4)), 3)
    with pytest.raises(NotOnDeviceError, match="cannot run the empty dataset"):
        compiler.compile(fn.range(0), 0)
    assert issubclass(NotOnDeviceError, TypeError)


def test_device_arrays_are_numbers_that_keep_their_dtype() -> None:
    floats = np.zeros(3, np.float32)
    assert device_array(floats, "source") is floats
    assert device_array(np.zeros(2, bool), "source").dtype == bool
    with pytest.raises(NotOnDeviceError, match=r"reads numeric arrays .* got list"):
        device_array([1, 2], "source")
    with pytest.raises(NotOnDeviceError, match="got ndarray"):
        device_array(np.array(["a"]), "source")
    with pytest.raises(NotOnDeviceError, match="dtype int64 would become int32 on device"):
        device_array(np.arange(3, dtype=np.int64), "source")  # 32-bit jax (the default)


def test_call_traced_notes_the_stage_of_an_error() -> None:
    assert call_traced("map(f)", lambda x: x + 1, 1) == 2

    def broken(x: int) -> int:
        raise KeyError("field")

    with pytest.raises(KeyError) as raised:
        call_traced("map(broken)", broken, 1)
    assert raised.value.__notes__ == [
        "(in map(broken), traced by to_jax: the function must be jax-traceable)"
    ]

    def stops(x: int) -> int:
        raise StopIteration

    with pytest.raises(UserStopIterationError, match=r"map\(stops\) raised StopIteration"):
        call_traced("map(stops)", stops, 1)
