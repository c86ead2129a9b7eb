"""`to_jax`: a map-level pipeline as pure jax functions of a position and of a state.

The value `to_jax` returns is a jax pytree whose leaves are the arrays the
pipeline reads (its sources and index tables), so it can be passed into
`jax.jit` or closed over. Its `get_many` traces under `jit` and `vmap`; its
`step` is a pure function of an `EpochPosition` of jax integers, for
`lax.scan` and `lax.fori_loop`, that never ends: past the dataset's length it
reads the next epoch. The order is the host's, element for element, and its
host twin is the stream `fn.from_dataset(fn.repeat(None, ds))` (`stream`):
states convert both ways with `host_state` and `device_state`, and
`fn.iterate`, `fn.state_to_dict` and `fn.state_from_dict` take the `to_jax`
value and its states directly. Its block form, `scan` and `steps`, does the
index math of many steps as one vectorized computation (each stage's
`Program` resolves addresses, then reads them), with the same elements and
states as steps one at a time. Where the top stage is a batch, `get_rows` and
`step_rows` compute only one shard's contiguous rows of each batch (one
device's, under `shard_map` or `pmap`), from the same compiled program.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.arguments import core_of
from grainfn._src.core.compiler import Compiler, NotOnDeviceError, Program
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.state import DatasetPosition, EpochPosition, SavedEpochPosition, as_host
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.core.stream import Stream
from grainfn._src.device import host_twin, step_states
from grainfn._src.device.program_key import pipeline_key
from grainfn._src.index.device_ints import (
    IntMode,
    Split,
    UnrepresentableError,
    current_mode,
    require,
    split,
)
from grainfn._src.stages.batch import BatchProgram

BLOCK_BYTES = 8 * 2**20
"""About how many bytes of addresses `JaxDataset.scan` resolves at once by default."""

FOLD_WARNING_BYTES = 16 * 2**20
"""How many bytes of a to_jax value's arrays a traced program may fold in as constants
before `step` and `get_many` warn (folding costs compile time: seconds per 100 MB)."""


class _Static:
    """What a JaxDataset's pytree keeps beside its arrays.

    Two compare equal when they were compiled in the same mode from equal
    pipelines (`pipeline_key`), so `jax.jit` reuses its trace and program for
    `to_jax` of a pipeline built again (its arrays, the pytree's leaves, may
    then be new ones).
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        mode: IntMode,
        at_position: Program,
        at_step: Program | Exception,
    ) -> None:
        self.dataset, self.mode = dataset, mode
        self.at_position = at_position  # compiled for the positions the mode holds
        self.at_step = at_step  # compiled for every epoch a state holds, or why it cannot be
        self.step_bound = step_states.step_bound(dataset.length, mode)
        self.period = step_states.state_period(dataset.length)
        self.twin = host_twin.twin(dataset, mode)  # the stream step reads as
        self.codec = StateCodec(self.twin)  # its fingerprint marks saved states
        self.warned_fold = False
        self.key = (pipeline_key(dataset), mode, self.step_bound)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@jax.tree_util.register_pytree_node_class
class JaxDataset:
    """A map-level pipeline compiled for jax by `to_jax`; see `grainfn.fn.to_jax`.

    Attributes:
        dataset: The host dataset it was compiled from.
        length: Positions per epoch (`sys.maxsize` if infinite), as `dataset.length`.
        period: Positions per epoch of its step states (`EpochPosition`): the
            length, or 2**31 where the length is not below it.
        arrays: The arrays the pipeline reads: its pytree leaves.
    """

    def __init__(self, static: _Static, arrays: Sequence[Any]) -> None:
        self._static = static
        self.arrays = tuple(arrays)

    @property
    def dataset(self) -> Dataset[Any]:
        return self._static.dataset

    @property
    def length(self) -> int:
        return self._static.dataset.length

    @property
    def period(self) -> int:
        return self._static.period

    @property
    def stream(self) -> Stream[Any]:
        """The host twin: `from_dataset(repeat(None, dataset))`, its functions run as on device."""
        return self._static.twin

    @property
    def fingerprint(self) -> tuple[int, ...]:
        """The pipeline's fingerprint, which its saved states hold (see `saved_state`)."""
        return self._static.codec.fingerprint

    def get_many(self, positions: Any) -> Any:
        """The elements at `positions`, stacked: each leaf gains the leading axes of `positions`.

        Equals `dataset.get_many(positions)` element for element, floats that
        functions compute to rounding (docs/jax.md, "Floats"). Positions past
        `length` read later epochs, as on the host.

        Args:
            positions: Integers >= 0, of any shape; a jax array (traced or not)
                or anything `jnp.asarray` takes.
        """
        self._check_mode()
        self._check_folding(positions)
        positions = self._positions(positions)
        flat = jax.vmap(self._one)(positions.reshape(-1))
        shape = positions.shape
        return jax.tree_util.tree_map(lambda leaf: leaf.reshape(*shape, *leaf.shape[1:]), flat)

    def get(self, position: Any) -> Any:
        """The element at one position (an integer >= 0, traced or not)."""
        self._check_mode()
        self._check_folding(position)
        return self._one(self._positions(position))

    def init(self) -> EpochPosition:
        """The state before the first element: `EpochPosition(0, 0)` of jax integers."""
        self._check_steps()
        dtype = self._static.mode.position_dtype
        # Two buffers, not one used twice: a jitted step may donate the state (donate_argnums).
        epoch, offset = jnp.zeros((), dtype), jnp.zeros((), dtype)
        return EpochPosition(cast(int, epoch), cast(int, offset))

    def step(self, state: EpochPosition) -> tuple[Any, EpochPosition]:
        """`(element at state, the state after it)`: pure, for `lax.scan`.

        The dataset does not end here: past `length` the steps read the next
        epoch, as its host twin `stream` does. Scan `length` steps for one
        epoch. The epoch counter holds up to 2**31 - 1 epochs of `period`
        positions in 32-bit mode.

        Args:
            state: An `EpochPosition` (from `init`, `step`, `device_state` or
                `fn.state_from_dict(jds, saved)`), traced or not.
        """
        at, after = self._advance(state, "step")
        program = cast(Program, self._static.at_step)  # _advance checked: not an error
        return program(self.arrays, at), after

    def steps(self, state: EpochPosition, count: int) -> tuple[Any, EpochPosition]:
        """The next `count` elements, stacked, and the state after them: `count` steps at once.

        Equals `count` calls of `step`, element for element (a reduction in a
        function to rounding) and state for state, but the index math of all
        `count` positions runs as one vectorized computation (one `get_many`),
        where a scan of `step` runs it one position at a time. The elements
        are all held at once: to train on a long run of steps with memory for
        one, use `scan`.

        Args:
            state: An `EpochPosition`, as `step` takes it.
            count: How many steps: a Python int in `[1, 2**31 - 1]`.

        Examples:
            >>> from grainfn import fn
            >>> jds = fn.to_jax(fn.shuffle(fn.range(4), seed=0))
            >>> elements, state = jds.steps(jds.init(), 6)
            >>> elements.shape, jds.host_state(state)
            ((6,), DatasetPosition(position=6))
            >>> sorted(elements[:4].tolist()), bool((elements[4:] == jds.get_many([4, 5])).all())
            ([0, 1, 2, 3], True)
        """
        count = _check_count(count, "count", "steps")
        addresses, after = self._resolve_block(state, count, "steps")
        program = cast(Program, self._static.at_step)
        elements = jax.vmap(program.read, in_axes=(None, 0))(self.arrays, addresses)
        return elements, after

    def scan(
        self,
        body: Callable[[Any, Any], tuple[Any, Any]],
        carry: Any,
        state: EpochPosition,
        length: int,
        *,
        block: int | None = None,
    ) -> tuple[Any, EpochPosition, Any]:
        """`length` steps of `body(carry, element) -> (carry, y)`, as `lax.scan` over `step`.

        The same elements in the same order as a `lax.scan` whose body calls
        `step`, and the same state after them, but faster where steps are
        small (on accelerators, several times): the index math (permutations,
        mixes' choices, random keys) of `block` steps at a time runs as one
        vectorized computation that gives each step's addresses (the source
        rows it reads), and then a scan reads and trains one step at a time.
        Memory holds the addresses of one block of steps, and the data of one
        step. Call it inside `jax.jit`, passing this value as an argument;
        called outside, it compiles one program per `(body, length, block)`
        and reuses it.

        Args:
            body: `(carry, element) -> (carry, y)`, as `lax.scan`'s.
            carry: The initial carry.
            state: An `EpochPosition`, as `step` takes it.
            length: How many steps: a Python int >= 0.
            block: Steps whose addresses are resolved at once: a Python int
                >= 1. By default, as many as take about 8 MiB of addresses,
                at most `length`. States and elements do not depend on it.

        Returns:
            `(carry, state, ys)`: the final carry, the state after the
            `length` steps (as after `length` calls of `step`), and the
            `y`s stacked, as `lax.scan` returns them.

        Examples:
            >>> import jax
            >>> from grainfn import fn
            >>> jds = fn.to_jax(fn.batch(2, fn.shuffle(fn.range(6), seed=0)))
            >>> def total(carry, batch):
            ...     return carry + batch.sum(), batch[0]
            >>> carry, state, firsts = jax.jit(
            ...     lambda jds, state: jds.scan(total, 0, state, 4, block=3))(jds, jds.init())
            >>> jds.host_state(state), firsts.shape
            (DatasetPosition(position=4), (4,))
            >>> import itertools  # the host twin's first 4 batches: the same sum
            >>> int(carry) == sum(int(b.sum()) for b in itertools.islice(fn.iterate(jds.stream), 4))
            True
        """
        length = _check_count(length, "length", "scan", smallest=0)
        if block is None:
            block = self._default_block(length)
        block = min(_check_count(block, "block", "scan"), max(length, 1))
        if _outside_traces() and validate.is_hashable(body):
            self._state_fields(state, "scan")  # checked here, where it is concrete
            # Run op by op, the index math would compile each of its operations for this
            # block's shapes; one program for (body, length, block) compiles once.
            return _scan_compiled(self, body, carry, state, length, block)
        arrays = self.arrays

        def run_block(carry: Any, state: EpochPosition, count: int) -> tuple[Any, Any, Any]:
            addresses, after = self._resolve_block(state, count, "scan")
            read = cast(Program, self._static.at_step).read
            carry, ys = jax.lax.scan(lambda c, at: body(c, read(arrays, at)), carry, addresses)
            return carry, after, ys

        if length <= block:  # one block: no outer loop to compile
            return run_block(carry, state, length)
        whole_blocks, rest = divmod(length, block)

        def outer(carry_state: tuple[Any, EpochPosition], _: Any) -> tuple[Any, Any]:
            carry, state, ys = run_block(carry_state[0], carry_state[1], block)
            return (carry, state), ys

        (carry, state), ys = jax.lax.scan(outer, (carry, state), None, length=whole_blocks)
        ys = jax.tree_util.tree_map(lambda y: y.reshape(-1, *y.shape[2:]), ys)
        if rest:
            carry, state, more = run_block(carry, state, rest)
            ys = jax.tree_util.tree_map(lambda y, z: jnp.concatenate([y, z]), ys, more)
        return carry, state, ys

    def get_rows(self, position: Any, shard: Any, num_shards: int) -> Any:
        """Shard `shard` of `num_shards`'s rows of the batch at `position`.

        The top stage must be a `batch` of `batch_size` rows that `num_shards`
        divides: shard `s` gets the `batch_size // num_shards` consecutive
        rows from `s * batch_size // num_shards`, the layout of
        `fn.elastic_batches`' hosts. It computes only those rows, so the
        shards' rows, stacked in shard order, are `get(position)`.

        Args:
            position: An integer >= 0, traced or not.
            shard: An integer in `[0, num_shards)`: a Python int, or a traced
                one such as `jax.lax.axis_index("data")` inside `shard_map`
                (a traced shard outside the range gives undefined rows).
            num_shards: How many shards share each batch: a Python int.

        Raises:
            NotOnDeviceError: if the top stage is not a batch.
            ValueError: if `num_shards` does not divide the batch size, or
                `shard` is not in `[0, num_shards)`.

        Examples:
            >>> from grainfn import fn
            >>> jds = fn.to_jax(fn.batch(4, fn.range(12)))
            >>> jds.get_rows(1, 1, 2), jds.get(1)
            (Array([6, 7], dtype=int32), Array([4, 5, 6, 7], dtype=int32))
        """
        self._check_mode()
        self._check_folding(position)
        program = self._batch_program(self._static.at_position, "get_rows")
        rows = self._shard_rows(program, shard, num_shards, "get_rows")
        mode, position = self._static.mode, self._positions(position)
        if position.shape != ():
            raise TypeError(
                f"get_rows takes one position, got positions of shape {position.shape}: "
                "jax.vmap it over many."
            )
        at = split(mode, position.astype(mode.unsigned), self.length, mode.top)
        return program.rows(_varying_like(rows, self.arrays), at, rows)

    def step_rows(
        self, state: EpochPosition, shard: Any, num_shards: int
    ) -> tuple[Any, EpochPosition]:
        """Shard `shard` of `num_shards`'s rows of the batch at `state`, and the state after it.

        The state is the global batch's, as `step`'s: every shard steps the
        same state, so it is one value for all of them, and it resumes with
        any other number of shards (or with `step`, or on the host). The
        rows are `get_rows`': shard `s` gets the `batch_size // num_shards`
        consecutive rows from `s * batch_size // num_shards`, so the shards'
        rows stacked in shard order are `step(state)`'s batch.

        Args:
            state: An `EpochPosition`, as `step` takes it.
            shard: An integer in `[0, num_shards)`: a Python int, or a traced
                one such as `jax.lax.axis_index("data")` inside `shard_map` or
                `pmap` (a traced shard outside the range gives undefined rows).
            num_shards: How many shards share each batch: a Python int that
                divides the batch size.

        Raises:
            NotOnDeviceError: if the top stage is not a batch.
            ValueError: if `num_shards` does not divide the batch size, or
                `shard` is not in `[0, num_shards)`.

        Examples:
            >>> import jax.numpy as jnp
            >>> from grainfn import fn
            >>> jds = fn.to_jax(fn.batch(4, fn.range(8)))
            >>> rows, state = jds.step_rows(jds.init(), 0, 2)
            >>> rows, jds.host_state(state)
            (Array([0, 1], dtype=int32), DatasetPosition(position=1))
            >>> whole, _ = jds.step(jds.init())
            >>> bool(jnp.all(jnp.concatenate([jds.step_rows(jds.init(), s, 2)[0] for s in (0, 1)])
            ...     == whole))
            True
        """
        self._check_mode()
        self._check_steps()
        program = self._batch_program(self._static.at_step, "step_rows")
        rows = self._shard_rows(program, shard, num_shards, "step_rows")
        at, after = self._advance(state, "step_rows")
        return program.rows(_varying_like(rows, self.arrays), at, rows), after

    def _advance(self, state: Any, name: str) -> tuple[Split, EpochPosition]:
        """The top stage's Split at `state`, and the state after it."""
        epoch, offset = self._state_fields(state, name)
        mode, period = self._static.mode, self.period
        at = step_states.top_split(mode, epoch, offset, self.length, period)
        return at, EpochPosition(*step_states.after(mode, epoch, offset, 1, period))

    def _resolve_block(self, state: Any, count: int, name: str) -> tuple[Any, EpochPosition]:
        """The addresses of the `count` steps from `state`, stacked, and the state after them."""
        epoch, offset = self._state_fields(state, name)
        mode, period, length = self._static.mode, self.period, self.length
        program = cast(Program, self._static.at_step)  # _state_fields checked: not an error
        ahead = jnp.arange(count, dtype=mode.unsigned)
        epochs, offsets = step_states.after(mode, epoch, offset, ahead, period)

        def addresses(epoch: Any, offset: Any) -> Any:
            at = step_states.top_split(mode, epoch, offset, length, period)
            return program.resolve(self.arrays, at)

        after = EpochPosition(*step_states.after(mode, epoch, offset, count, period))
        return jax.vmap(addresses)(epochs, offsets), after

    def _state_fields(self, state: Any, name: str) -> tuple[Any, Any]:
        """`state`'s epoch and offset as jax integers of the mode, checked where concrete."""
        self._check_mode()
        self._check_steps()
        if not isinstance(state, EpochPosition):
            raise TypeError(
                f"{name} takes the EpochPosition that init() or step() returned, or that "
                f"jds.device_state or fn.state_from_dict(jds, saved) gave (which restore a "
                f"saved state, checking that it belongs here), got {state!r}."
            )
        self._check_folding(state)
        mode = self._static.mode
        if not any(isinstance(field, jax.core.Tracer) for field in state):
            stage = self.dataset.describe_stage()
            saved_epoch, _ = step_states.check_fields(as_host(state), self.period, stage)
            # A state saved by a 64-bit run may hold an epoch a 32-bit one would wrap.
            require(
                saved_epoch <= mode.top,
                f"the state {state!r}",
                f"its epoch {saved_epoch} does not fit {mode.position_dtype}",
                mode,
            )
        epoch, offset = (jnp.asarray(field, mode.position_dtype) for field in state)
        return epoch, offset

    def _default_block(self, length: int) -> int:
        """As many steps as take about BLOCK_BYTES of addresses, at most `length`."""
        program = cast(Program, self._static.at_step)
        arrays = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in self.arrays]
        zero = jax.ShapeDtypeStruct((), self._static.mode.position_dtype)
        at = jax.eval_shape(
            lambda e, o: step_states.top_split(self._static.mode, e, o, self.length, self.period),
            zero,
            zero,
        )
        shapes = jax.eval_shape(program.resolve, arrays, at)
        leaves = jax.tree_util.tree_leaves(shapes)
        per_step = sum(leaf.size * leaf.dtype.itemsize for leaf in leaves)
        return max(1, min(length, BLOCK_BYTES // max(per_step, 1)))

    def _batch_program(self, program: Program | Exception, name: str) -> BatchProgram:
        """`program` as the top batch stage's, or a refusal naming the top stage."""
        if isinstance(program, BatchProgram):
            return program
        top = self.dataset
        while top.transparent:
            top = top.parents[0]
        raise NotOnDeviceError(
            f"{name} reads some rows of a batch, but the top stage of this to_jax pipeline is "
            f"{top.describe_stage()!r}, not a batch. Make fn.batch the last stage (maps of "
            "whole batches go in the training step), or read whole elements with step and get."
        )

    def _shard_rows(self, program: BatchProgram, shard: Any, num_shards: int, name: str) -> Any:
        """The row numbers of shard `shard` of `num_shards` in a batch of `program`."""
        size = program.batch_size
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(
                f"{name} got num_shards={num_shards!r}: it is the number of shards sharing a "
                f"batch, a Python int >= 1 that divides the batch size {size} (a static value, "
                "not a traced one)."
            )
        if size % num_shards:
            divisors = [d for d in range(1, min(size, 64) + 1) if size % d == 0]
            raise ValueError(
                f"{name} got num_shards={num_shards}, which does not divide the batch size "
                f"{size}: each shard takes batch_size // num_shards rows. Use a number of shards "
                f"that divides it (such as {', '.join(map(str, divisors))}), or a batch size "
                f"that {num_shards} divides."
            )
        if not isinstance(shard, jax.core.Tracer):
            host = np.asarray(shard)
            if host.shape != () or host.dtype.kind not in "iu":
                raise TypeError(f"{name} takes shard as one integer, got {shard!r}.")
            if not 0 <= int(host) < num_shards:
                raise ValueError(
                    f"{name} got shard={int(host)}; it must be an integer in [0, {num_shards - 1}] "
                    f"for num_shards={num_shards}."
                )
        elif shard.shape != () or not jnp.issubdtype(shard.dtype, jnp.integer):
            raise TypeError(f"{name} takes shard as one integer, got {shard!r}.")
        per_shard = size // num_shards
        unsigned = self._static.mode.unsigned
        first = jnp.asarray(shard).astype(unsigned) * unsigned.type(per_shard)
        return first + jnp.arange(per_shard, dtype=unsigned)

    def host_state(self, state: Any) -> DatasetPosition:
        """The state of the host twin `stream` at the same place as `state`.

        Args:
            state: An `EpochPosition` (jax, numpy or Python integers), the
                dict Orbax restores one as without a target, or a
                `DatasetPosition` of the twin (returned as is).

        Raises:
            ValueError: naming a field that is not an integer in its range, or
                the stage lines where a saved state's fingerprint differs.
        """
        stage, codec = self.dataset.describe_stage(), self._static.codec
        return step_states.to_host(state, self.period, stage, codec)

    def device_state(self, state: Any) -> EpochPosition:
        """The `EpochPosition` (jax integers, buffers of their own) at `state`: restores one.

        Args:
            state: A `SavedEpochPosition` (or the dict Orbax restores it as),
                refused unless it holds this pipeline's fingerprint; an
                `EpochPosition`; or a `DatasetPosition` of the host twin.

        Raises:
            ValueError: naming the stage lines where a saved state's
                fingerprint differs, or a field out of its range.
            UnrepresentableError: if its epoch passes what the position dtype holds.
        """
        stage, codec = self.dataset.describe_stage(), self._static.codec
        return step_states.to_device(state, self.period, self._static.mode, stage, codec)

    def saved_state(self, state: EpochPosition) -> SavedEpochPosition:
        """`state` with this pipeline's fingerprint, to save; `device_state` restores it.

        `step` carries two integers, the cheapest state to pass into jit; the
        fingerprint is added here, outside jit, and checked on restore.

        Args:
            state: An `EpochPosition`, as `step` takes it.

        Examples:
            >>> from grainfn import fn
            >>> jds = fn.to_jax(fn.batch(4, fn.range(40)))
            >>> saved = jds.saved_state(jds.device_state(fn.DatasetPosition(13)))
            >>> saved.epoch, saved.offset, saved.pipeline.shape
            (Array(1, dtype=int32), Array(3, dtype=int32), (16,))
            >>> jds.host_state(jds.device_state(saved))
            DatasetPosition(position=13)
        """
        epoch, offset = self._state_fields(state, "saved_state")
        return step_states.saved(epoch, offset, self._static.codec)

    def _one(self, position: Any) -> Any:
        mode = self._static.mode
        at = split(mode, position.astype(mode.unsigned), self.length, mode.top)
        return self._static.at_position(self.arrays, at)

    def _positions(self, positions: Any) -> Any:
        mode = self._static.mode
        if not isinstance(positions, jax.core.Tracer):
            host = np.asarray(positions)
            if host.dtype.kind not in "iu":
                raise TypeError(f"positions must be integers, got dtype {host.dtype}.")
            if host.size and int(host.min()) < 0:
                raise ValueError(f"positions must be >= 0, got {int(host.min())}.")
            if host.size:
                require(
                    int(host.max()) <= mode.top,
                    "the positions",
                    f"position {int(host.max())} does not fit {mode.position_dtype}",
                    mode,
                )
            return jnp.asarray(host, mode.position_dtype)
        if not jnp.issubdtype(positions.dtype, jnp.integer):
            raise TypeError(f"positions must be integers, got dtype {positions.dtype}.")
        return positions

    def _check_mode(self) -> None:
        mode, now = self._static.mode, current_mode()
        if mode != now:
            raise ValueError(
                f"This to_jax value was compiled for {mode.bits}-bit integers, but jax now runs "
                f"with {now.bits}-bit ones (jax_enable_x64 changed): call fn.to_jax again."
            )

    def _check_folding(self, argument: Any) -> None:
        """Warns once when a jit trace closes over this value's arrays and they are large."""
        static = self._static
        if static.warned_fold or any(isinstance(a, jax.core.Tracer) for a in self.arrays):
            return
        traced = jax.tree_util.tree_leaves(argument)
        if not any(type(leaf).__name__ == "DynamicJaxprTracer" for leaf in traced):
            return  # not inside jit, scan or another staged trace
        size = sum(int(getattr(array, "nbytes", 0)) for array in self.arrays)
        if size > FOLD_WARNING_BYTES:
            static.warned_fold = True
            warnings.warn(
                f"A jitted function closes over this to_jax value, so its {size / 2**20:.0f} "
                "MiB of arrays are folded into the program as constants: compiling is slow "
                "(seconds per 100 MB) and the program large. Pass it as an argument instead: "
                "jax.jit(fn.JaxDataset.step)(jds, state), or make jds a parameter of the "
                "jitted function.",
                stacklevel=3,
            )

    def _check_steps(self) -> None:
        if isinstance(self._static.at_step, Exception):
            raise self._static.at_step

    def tree_flatten(self) -> tuple[tuple[Any, ...], _Static]:
        return self.arrays, self._static

    @classmethod
    def tree_unflatten(cls, static: _Static, arrays: Sequence[Any]) -> JaxDataset:
        return cls(static, arrays)

    def __repr__(self) -> str:
        mode = self._static.mode
        return f"to_jax({mode.bits}-bit) of\n{self.dataset!r}"


@functools.partial(jax.jit, static_argnums=(1, 4, 5))
def _scan_compiled(
    jds: JaxDataset, body: Any, carry: Any, state: EpochPosition, length: int, block: int
) -> tuple[Any, EpochPosition, Any]:
    return jds.scan(body, carry, state, length, block=block)


def _outside_traces() -> bool:
    """Whether no staging trace (`jit`, `scan`'s body) is running: there, new values are tracers."""
    return not isinstance(jnp.zeros((), jnp.int8), jax.core.Tracer)


def _check_count(value: Any, name: str, method: str, smallest: int = 1) -> int:
    """`value` checked to be a Python int in `[smallest, 2**31 - 1]`."""
    if isinstance(value, bool) or not isinstance(value, int) or not smallest <= value < 2**31:
        raise ValueError(
            f"{method} got {name}={value!r}; it must be a Python int in [{smallest}, 2**31 - 1] "
            "(a static number of steps, not a traced one)."
        )
    return value


def _varying_like(rows: Any, arrays: Sequence[Any]) -> Sequence[Any]:
    """`arrays`, varying over the mesh axes that `rows` varies over inside `shard_map`.

    A shard's rows depend on `jax.lax.axis_index`, so inside `shard_map` they
    vary over its axis while the pipeline's arrays do not. Under `vmap`,
    `lax.switch` (a mix's choice of component) then fails jax's check of
    varying axes (jax 0.10: "pvary is a invariant->variant collective"), so
    the arrays are cast to vary alike first: a cast of types that moves no data.
    """
    typeof = getattr(jax, "typeof", None)
    if typeof is None:  # a jax without varying axes in its types
        return arrays
    aval = typeof(rows)
    varying = getattr(getattr(aval, "mat", None), "varying", None)
    if varying is None:  # jax before 0.10 calls the same set `vma`
        varying = getattr(aval, "vma", frozenset())
    if not varying:
        return arrays
    axes = tuple(sorted(varying))
    pcast = getattr(jax.lax, "pcast", None)
    if pcast is None:  # jax before pcast: pvary is the same cast
        pvary = jax.lax.pvary  # type: ignore[attr-defined]
        return [pvary(array, axes) for array in arrays]
    return [pcast(array, axes, to="varying") for array in arrays]


def to_jax(ds: Dataset[Any]) -> JaxDataset:
    """Compiles a map-level pipeline into jax functions with the host's exact order.

    Supported: `range`; `source` over a jax or numpy array, a dict of them
    (rows), or a list or tuple of arrays of one shape and dtype (items);
    then `seed`, `shuffle`, `window_shuffle`, `slice`, `repeat`, `mix`,
    `concatenate`, `select_from_datasets` (components of one structure,
    shape and dtype), `map` and `map_with_index` (with jax-traceable
    functions), `batch` (every batch full: `drop_remainder=True`, or a
    length the batch size divides) and `random_map` with `rng="jax"`, whose
    function takes a `jax.random` key on host and device alike: the key of
    position `epoch * length + offset` is `jax.random.key(seed)` (as with
    64-bit integers; seeds below 2**64) folded with the epoch (mod 2**32),
    then the offset's high and low 32-bit words. Its draws are the same on
    any device, process or resume, and in both integer modes. Each stage
    kind holds its device form in its own module (`device_program`), or the
    reason it has none (`device_refusal`).

    With `jax_enable_x64` off, positions and values are int32 and every
    result is exact where it fits; what cannot be exact is refused here, or,
    where only later epochs cannot be, by `step`. Endless pipelines (a
    repeat forever, a mix of them) are exact in both modes.

    `step` never ends: its host twin is `fn.from_dataset(fn.repeat(None,
    ds))`, and `fn.iterate`, `fn.state_to_dict` and `fn.state_from_dict`
    take the returned value and its `EpochPosition` states. Pass the value
    into jitted functions as an argument: a closure folds its arrays into the
    program as constants.

    Args:
        ds: A grainfn Dataset built from the stages above, or a `MapDataset` of
            the Grain API (its `.core`).

    Returns:
        A JaxDataset with `length`, `get_many`, `get`, `init` and `step`; the
        block form `scan` and `steps`, which resolve the indices of many steps
        at once (the fast loop on accelerators); and where the top stage is a
        batch, `get_rows` and `step_rows`: one device's (or host's) rows of
        each batch.

    Raises:
        NotOnDeviceError: naming the first stage that cannot run on device, and why.
        OverflowError: where 32-bit integers cannot be exact (names jax_enable_x64).

    Examples:
        >>> import jax
        >>> from grainfn import fn
        >>> ds = fn.batch(2, fn.shuffle(fn.range(6), seed=0))
        >>> jds = fn.to_jax(ds)
        >>> jax.jit(jds.get_many)(jax.numpy.arange(3)).tolist() == [
        ...     b.tolist() for b in ds.get_many([0, 1, 2])]
        True
        >>> element, state = jax.jit(fn.JaxDataset.step)(jds, jds.init())
        >>> fn.state_to_dict(jds, state)["state"]
        {'kind': 'DatasetPosition', 'position': 1}
        >>> jds.host_state(fn.EpochPosition(epoch=7, offset=2))
        DatasetPosition(position=23)
    """
    data: Any = core_of(ds)  # a MapDataset of the Grain API wraps its dataset
    if isinstance(data, Stream):
        raise NotOnDeviceError(
            f"to_jax cannot run the stream stage {data.describe_stage()!r}: a stream keeps its "
            "position in host cursors. Compile the map-level dataset before fn.from_dataset."
        )
    if not isinstance(data, Dataset):
        raise TypeError(f"to_jax takes a grainfn Dataset, got {ds!r} of type {type(ds).__name__}.")
    mode = current_mode()
    compiler = Compiler(mode)
    at_position = compiler.compile(data, mode.top)
    bound, kept = step_states.step_bound(data.length, mode), len(compiler.arrays)
    at_step: Program | Exception = at_position
    if bound > mode.top:  # 32-bit: states reach further than positions
        try:
            at_step = compiler.compile(data, bound)  # the arrays it shares are kept once
        except UnrepresentableError as error:
            del compiler.arrays[kept:]
            at_step = UnrepresentableError(
                f"step cannot be exact here: its states reach every epoch they hold (positions "
                f"up to {bound}), and {error} get_many is exact: it takes positions up to "
                f"{mode.top}."
            )
    arrays = [jnp.asarray(array) for array in compiler.arrays]
    return JaxDataset(_Static(data, mode, at_position, at_step), arrays)
