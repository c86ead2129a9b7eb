"""Compiling a map-level pipeline into one jax function of a position (`fn.to_jax`).

Each stage holds its device form in its own module, beside its index rule: its
`device_program(compiler, bound)` compiles its parents (`compiler.compile`)
and returns a `Program` for positions up to `bound`: pure functions that jax
traces, in two phases. `resolve(arrays, Split)` does the index math and gives
the element's addresses (integers: the source rows it reads, a mix's choice,
random keys); `read(arrays, addresses)` reads the sources there and applies
the maps. Calling the program does both; the block form of `to_jax`
(`JaxDataset.scan`) resolves many steps' addresses in one vectorized
computation and reads them one step at a time. A stage without a device form
says why in its `device_refusal`. Arrays a program reads (sources, index tables) are not baked
into it: the compiler collects them (`add`), so they travel as the leaves of
the `JaxDataset` pytree.

The index math itself is the host's: the programs call the functions of
`grainfn._src.index` on jax values, or tabulate them on the host once. Positions
come as `Split(epoch, offset)` of the stage's own length, the offset a `Wide`
pair where it can pass 2**32 - 1 with 32-bit integers; only stages marked
`takes_wide_offsets` take those (see `grainfn._src.index.device_ints`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.index.device_ints import IntMode, offset_bound, require, wide_offsets

if TYPE_CHECKING:
    from grainfn._src.core.dataset import Dataset


@dataclasses.dataclass(frozen=True)
class Program:
    """A compiled stage: the element at a position, in two phases.

    Attributes:
        resolve: `(arrays, at) -> addresses`: the index math alone, a pytree
            of integer arrays that depends only on the position `at` (a
            `Split`, or whatever the stage above passes) and the index tables.
        read: `(arrays, addresses) -> element`: the source reads and maps.

    Examples:
        >>> import numpy as np
        >>> from grainfn._src.index.device_ints import Split
        >>> rows = Program(lambda arrays, at: at.offset, lambda arrays, i: arrays[0][i])
        >>> reversed_rows = rows.at(lambda arrays, at: Split(at.epoch, 2 - at.offset))
        >>> int(reversed_rows([np.array([10, 11, 12])], Split(0, 0)))
        12
    """

    resolve: Callable[[Sequence[Any], Any], Any]
    read: Callable[[Sequence[Any], Any], Any]

    def __call__(self, arrays: Sequence[Any], at: Any) -> Any:
        return self.read(arrays, self.resolve(arrays, at))

    def at(self, move: Callable[[Sequence[Any], Any], Any]) -> Program:
        """This program, read where `move(arrays, at)` says: an index stage over it."""
        resolve = self.resolve
        return Program(lambda arrays, at: resolve(arrays, move(arrays, at)), self.read)

    def then(self, finish: Callable[[Sequence[Any], Any], Any]) -> Program:
        """This program's element passed through `finish(arrays, element)`: a map over it."""
        read = self.read
        return Program(self.resolve, lambda arrays, where: finish(arrays, read(arrays, where)))


class NotOnDeviceError(TypeError):
    """A stage that has no device form: the message names it and says why."""


@dataclasses.dataclass
class Compiler:
    """Compiles one pipeline in one integer mode, collecting the arrays its programs read."""

    mode: IntMode
    arrays: list[Any] = dataclasses.field(default_factory=list)

    def add(self, array: Any) -> int:
        """Keeps `array` as a leaf of the compiled dataset; returns its place in `arrays`.

        An array kept already (the same object: a source compiled again for
        another bound) is kept once.
        """
        for place, kept in enumerate(self.arrays):
            if kept is array:
                return place
        self.arrays.append(array)
        return len(self.arrays) - 1

    def compile(self, ds: Dataset[Any], bound: int) -> Program:
        """The program of `ds`, asked for positions up to `bound`.

        Raises:
            NotOnDeviceError: naming the first stage without a device form.
            UnrepresentableError: where the integer mode cannot be exact.
        """
        if ds.transparent:  # timing and other wrappers that change nothing
            return self.compile(ds.parents[0], bound)
        if ds.length == 0:
            raise NotOnDeviceError(
                f"to_jax cannot run the empty dataset {ds.describe_stage()!r}: there is "
                "no element to give at any position."
            )
        if not ds.has_device_form:
            raise NotOnDeviceError(
                f"to_jax cannot run the stage {ds.describe_stage()!r} "
                f"({type(ds).__name__}): {ds.device_refusal}."
            )
        require(
            not self.wide(ds, bound) or ds.takes_wide_offsets,
            ds.describe_stage(),
            f"its positions within an epoch reach {offset_bound(ds.length, bound)}",
            self.mode,
        )
        return ds.device_program(self, bound)

    def wide(self, ds: Dataset[Any], bound: int) -> bool:
        """Whether `ds`'s offsets, asked up to `bound`, are `Wide` pairs (see `wide_offsets`)."""
        return wide_offsets(self.mode, ds.length, bound)


def device_array(leaf: Any, stage: str) -> Any:
    """`leaf` checked to be a numeric array that keeps its dtype on device.

    Raises:
        NotOnDeviceError: naming `stage`, for anything else, or for an array
            jax would store in another dtype (int64 with 32-bit integers).
    """
    import jax

    dtype = getattr(leaf, "dtype", None)
    # jax's own test, not numpy's kind: bfloat16 and the other ml_dtypes are numbers to jax.
    number = dtype is not None and (
        jax.dtypes.issubdtype(dtype, np.number) or jax.dtypes.issubdtype(dtype, np.bool_)
    )
    if not hasattr(leaf, "shape") or not number:
        raise NotOnDeviceError(
            f"to_jax cannot run {stage!r}: on device it reads numeric arrays (a jax or numpy "
            f"array, or a dict of them), got {type(leaf).__name__}. Pass "
            "jnp.asarray(data), or a dict such as {'x': xs, 'y': ys}."
        )
    canonical = jax.dtypes.canonicalize_dtype(dtype)
    if canonical != np.dtype(dtype):
        raise NotOnDeviceError(
            f"to_jax cannot run {stage!r}: its array of dtype {np.dtype(dtype)} "
            f"would become {canonical} on device, so its elements would differ from the host's. "
            f"Convert it first (array.astype(np.{canonical})), or enable 64-bit types with "
            "jax.config.update('jax_enable_x64', True)."
        )
    return leaf


def call_traced(stage: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` while jax traces a program; an error gets a note naming `stage`.

    A StopIteration becomes a `UserStopIterationError`, as on the host: a
    loop over `step` or `get` would take it for the end of the data.
    """
    try:
        return fn(*args)
    except StopIteration as stop:
        validate.note_user_error(stop, stage, "the elements, while to_jax traced it")
        raise  # not reached: note_user_error raises in its place
    except Exception as error:
        error.add_note(f"(in {stage}, traced by to_jax: the function must be jax-traceable)")
        raise
