"""The host twin of a `to_jax` pipeline: the dataset repeated, its functions compiled as on device.

`step` never ends, so its host twin is `fn.from_dataset(fn.repeat(None, ds))`:
its positions, states and element structure are the host's. Its floats are
the device's, bit for bit, where the device is the CPU: XLA compiles a
pipeline's user functions (map, map_with_index, random_map) into one
program, fusing them (a multiply and an add become one rounding), across
stages too, and rounds a reduction under `jax.vmap` unlike one outside it,
or under a vmap of a few rows unlike one of many. So the twin does not call
them one by one on the host. Each topmost stage that calls functions
(`Dataset.calls_functions`), with everything below it, becomes a
`CompiledStage`: the device program of that part of the pipeline, jitted on
the host's CPU, computing a chunk of positions per call in a loop, each as
the device computes it: under nested vmaps of the widths of the batches
above it (`Dataset.vmap_width`), or alone where none is. The stages above it
only move and stack elements.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from grainfn._src.core.compiler import Compiler, Program
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.reading import from_dataset
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Stream
from grainfn._src.device import step_states
from grainfn._src.index.device_ints import IntMode, UnrepresentableError, require
from grainfn._src.stages.repeat import repeat

CHUNK = 64
"""About how many positions a compiled stage computes per call (whole groups of its batch
widths, at least one): one program, compiled once."""


def twin(data: Dataset[Any], mode: IntMode) -> Stream[Any]:
    """The host twin of `to_jax(data)` compiled in `mode`: the stream `step` reads as.

    `fn.from_dataset(fn.repeat(None, data))` (an endless dataset is its own
    repeat), with the parts that call functions compiled (`compiled_functions`).

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> from grainfn._src.index.device_ints import current_mode
        >>> ds = fn.batch(2, fn.map(lambda x: x * 1.1 + 0.3, fn.source(np.ones(4, np.float32))))
        >>> stream = twin(ds, current_mode())
        >>> print(stream)
        from_dataset()
          repeat(forever)  [length inf]
            batch(2)  [length 2]
              map(<lambda>)  [length 4]
                source(ndarray, length 4)  [length 4]
        >>> next(fn.iterate(stream)).tolist()
        [1.4000000953674316, 1.4000000953674316]
    """
    compiled = compiled_functions(data, mode, widths=())
    return from_dataset(compiled if data.length >= INFINITE else repeat(None, compiled))


def compiled_functions(node: Dataset[Any], mode: IntMode, widths: tuple[int, ...]) -> Dataset[Any]:
    """`node` with each topmost stage that calls functions, and what it reads, compiled.

    Args:
        node: A dataset `to_jax` compiles.
        mode: The integer mode it was compiled in.
        widths: The widths of the vmaps the device reads `node`'s elements
            under (the sizes of the batches above it, outermost first).

    Raises:
        TypeError: for a stage that keeps its parents outside its dataclass
            fields (no stage with a device form does).
    """
    if node.calls_functions:
        return CompiledStage(node, mode.bits, widths)
    width = node.vmap_width
    below = widths if width is None else (*widths, width)
    parents = tuple(compiled_functions(parent, mode, below) for parent in node.parents)
    if all(new is old for new, old in zip(parents, node.parents)):
        return node
    rebuilt = with_parents(node, parents)
    if rebuilt is None:
        raise TypeError(
            f"The host twin of to_jax cannot rebuild the stage {node.describe_stage()!r}: it "
            "does not keep its parents in its dataclass fields."
        )
    return rebuilt


@dataclasses.dataclass(frozen=True, repr=False)
class CompiledStage(Dataset[Any]):
    """`stage` and the pipeline below it, computed by its device program on the host's CPU.

    Its elements are those `to_jax(stage)` computes, as numpy arrays: with
    the device's rounding and dtypes. It is transparent: the pipeline reads
    as `stage`'s, so its states and description are the host's.

    Attributes:
        stage: The topmost stage that calls a function (and what it reads).
        bits: The integer mode `to_jax` compiled the pipeline in: 32 or 64.
        widths: The widths of the vmaps the device reads its elements under
            (the sizes of the batches above it, outermost first); () for none.
    """

    transparent = True  # the same positions and states, computed as on device
    spec_rule = SpecRule.PARENT

    stage: Dataset[Any]
    bits: int
    widths: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "length", self.stage.length)

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return (self.stage,)

    def describe_stage(self) -> str:
        return f"compiled(vmapped {'x'.join(map(str, self.widths)) or 'no'})"

    def _get(self, index: int) -> Any:
        return self._get_many(np.array([index], dtype=np.int64))[0]

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        if not indices.size:
            return []
        block = self._block(indices)
        leaves, structure = jax.tree_util.tree_flatten(block)
        rows = range(len(indices))
        return [jax.tree_util.tree_unflatten(structure, [a[j] for a in leaves]) for j in rows]

    def _get_array(self, indices: np.ndarray) -> np.ndarray | None:
        """The elements as one array, where each is one array (a batch cuts it)."""
        if not indices.size or not isinstance(self._program.shape, jax.ShapeDtypeStruct):
            return None
        return self._block(indices)

    def _block(self, indices: np.ndarray) -> Any:
        """The elements at `indices` (int64 >= 0), stacked: each leaf gains a leading axis."""
        program = self._program
        require(
            int(indices.max()) <= program.bound,
            f"the host twin of {self.stage.describe_stage()!r}",
            f"position {int(indices.max())} passes {program.bound}, where its program is exact",
            program.mode,
        )
        epochs, offsets = np.divmod(indices, program.period)
        per_call = program.groups * program.group
        parts = [  # one program, of `groups` groups of positions, compiled once
            self._chunk(epochs[first : first + per_call], offsets[first : first + per_call])
            for first in range(0, len(indices), per_call)
        ]
        if len(parts) == 1:
            return parts[0]
        return jax.tree_util.tree_map(lambda *leaves: np.concatenate(leaves), *parts)

    def _chunk(self, epochs: np.ndarray, offsets: np.ndarray) -> Any:
        """The elements at up to one call's (epoch, offset)s, stacked, as numpy arrays."""
        program, count = self._program, len(epochs)
        shape = (program.groups, *self.widths)
        size, dtype = program.groups * program.group, program.mode.position_dtype
        padded = [np.resize(a.astype(dtype), size).reshape(shape) for a in (epochs, offsets)]
        used = np.int32(-(-count // program.group))  # groups that hold a position asked for
        with jax.enable_x64(self.bits == 64), jax.default_device(program.cpu):
            block = program.run(program.arrays, *padded, used)
        return jax.tree_util.tree_map(
            lambda leaf: np.asarray(leaf).reshape(size, *leaf.shape[len(shape) :])[:count], block
        )

    @functools.cached_property
    def _program(self) -> _HostProgram:
        """The compiled program, made once per process (a pickled copy makes its own)."""
        return _HostProgram.of(self.stage, IntMode(self.bits), self.widths)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_program"}


@dataclasses.dataclass(frozen=True)
class _HostProgram:
    """A stage's device program, jitted for the host's CPU over groups of (epoch, offset)s.

    Attributes:
        mode: Its integer mode.
        cpu: The CPU device it runs on.
        arrays: Its arrays, on `cpu`.
        period: The period of its positions' (epoch, offset) form.
        bound: The largest position it computes exactly.
        group: Positions in a group, computed under one nest of vmaps (the
            product of the widths; 1 for none).
        groups: Groups per call.
        run: `(arrays, epochs, offsets, used) -> elements`, jitted: the
            elements of the first `used` groups of `(groups, *widths)` (epoch,
            offset)s, each group as the device computes it; stacked likewise.
        shape: The shape of one element (`jax.eval_shape`'s pytree).
    """

    mode: IntMode
    cpu: Any
    arrays: Sequence[Any]
    period: int
    bound: int
    group: int
    groups: int
    run: Any
    shape: Any

    @staticmethod
    def of(stage: Dataset[Any], mode: IntMode, widths: tuple[int, ...]) -> _HostProgram:
        """Compiles `stage` in `mode` as `to_jax` does, for every position its states reach."""
        cpu = jax.devices("cpu")[0]
        with jax.enable_x64(mode.bits == 64), jax.default_device(cpu):
            compiler, bound = Compiler(mode), step_states.step_bound(stage.length, mode)
            try:
                program = compiler.compile(stage, bound)
            except UnrepresentableError:  # later epochs pass the mode: positions up to its top
                compiler, bound = Compiler(mode), mode.top
                program = compiler.compile(stage, bound)
            arrays = [jax.device_put(a, cpu) for a in compiler.arrays]  # no copy if read-only
            period = step_states.state_period(stage.length)
            one = _element(program, mode, stage.length, period)
            zero = jax.ShapeDtypeStruct((), mode.position_dtype)
            shape = jax.eval_shape(one, arrays, zero, zero)
            group = math.prod(widths)
            groups = max(1, CHUNK // group)
            run = jax.jit(
                _group_by_group(_nested_vmaps(one, len(widths)), shape, (groups, *widths))
            )
        return _HostProgram(mode, cpu, arrays, period, bound, group, groups, run, shape)


def _element(program: Program, mode: IntMode, length: int, period: int) -> Any:
    """`(arrays, epoch, offset) -> element`: the element `step` reads at that state."""

    def one(arrays: Sequence[Any], epoch: Any, offset: Any) -> Any:
        return program(arrays, step_states.top_split(mode, epoch, offset, length, period))

    return one


def _nested_vmaps(one: Any, depth: int) -> Any:
    """`one` under `depth` nested `jax.vmap`s over its (epoch, offset)s: a batch of batches."""
    for _ in range(depth):
        one = jax.vmap(one, (None, 0, 0))
    return one


def _group_by_group(group: Any, shape: Any, full: tuple[int, ...]) -> Any:
    """`group` over the first `used` groups of a call, in a loop (`fori_loop`), as `step` reads.

    Args:
        group: `(arrays, epochs, offsets) -> elements` of one group.
        shape: The shape of one element.
        full: The shape of a call's (epoch, offset)s: `(groups, *widths)`.
    """

    def run(arrays: Sequence[Any], epochs: Any, offsets: Any, used: Any) -> Any:
        def body(i: Any, out: Any) -> Any:
            elements = group(arrays, epochs[i], offsets[i])
            return jax.tree_util.tree_map(lambda block, e: block.at[i].set(e), out, elements)

        empty = jax.tree_util.tree_map(lambda s: jnp.zeros((*full, *s.shape), s.dtype), shape)
        return jax.lax.fori_loop(0, used, body, empty)

    return run
