"""`to_jax`: a map-level pipeline as pure jax functions of a position and of a state.

The value `to_jax` returns is a jax pytree whose leaves are the arrays the
pipeline reads (its sources and index tables), so it can be passed into
`jax.jit` or closed over. Its `get_many` traces under `jit` and `vmap`; its
`step` is a pure function of a `DatasetPosition` whose field is a jax integer,
for `lax.scan` and `lax.fori_loop`. The order is the host's, element for
element, and a state converts with `fn.state_to_dict(jds.stream, state)` to the
dict the host stream `fn.from_dataset(ds)` has at the same position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import from_dataset
from grainfn._src.core.state import DatasetPosition
from grainfn._src.core.stream import Stream
from grainfn._src.device import element_rules, index_rules, route_rules
from grainfn._src.device.compiler import Compiler, NotOnDeviceError, Program, Rule
from grainfn._src.device.ints import IntMode, current_mode, require, split

RULES: dict[type, Rule] = {**index_rules.RULES, **route_rules.RULES, **element_rules.RULES}
"""The device rule of every stage kind that has one."""


class _Static:
    """What a JaxDataset's pytree keeps beside its arrays.

    It compares by identity, so `jax.jit` reuses its trace for the same compiled pipeline.
    """

    def __init__(self, dataset: Dataset[Any], mode: IntMode, program: Program) -> None:
        self.dataset, self.mode, self.program = dataset, mode, program


@jax.tree_util.register_pytree_node_class
class JaxDataset:
    """A map-level pipeline compiled for jax by `to_jax`; see `grainfn.fn.to_jax`.

    Attributes:
        dataset: The host dataset it was compiled from.
        length: Positions per epoch (`sys.maxsize` if infinite), as `dataset.length`.
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
    def stream(self) -> Stream[Any]:
        """The host stream `fn.from_dataset(dataset)`, whose states this one's steps match."""
        return from_dataset(self.dataset)

    def get_many(self, positions: Any) -> Any:
        """The elements at `positions`, stacked: each leaf gains the leading axes of `positions`.

        Equals `dataset.get_many(positions)` element for element (random_map
        aside: its draws come from `jax.random`, see `to_jax`). Positions past
        `length` read later epochs, as on the host.

        Args:
            positions: Integers >= 0, of any shape; a jax array (traced or not)
                or anything `jnp.asarray` takes.
        """
        self._check_mode()
        positions = self._positions(positions)
        flat = jax.vmap(self._one)(positions.reshape(-1))
        shape = positions.shape
        return jax.tree_util.tree_map(lambda leaf: leaf.reshape(*shape, *leaf.shape[1:]), flat)

    def get(self, position: Any) -> Any:
        """The element at one position (an integer >= 0, traced or not)."""
        self._check_mode()
        return self._one(self._positions(position))

    def init(self) -> DatasetPosition:
        """The state before the first element: `DatasetPosition(0)` as a jax integer."""
        return DatasetPosition(cast(int, jnp.zeros((), self._static.mode.position_dtype)))

    def step(self, state: DatasetPosition) -> tuple[Any, DatasetPosition]:
        """`(element at state.position, the state after it)`: pure, for `lax.scan`.

        A finite dataset does not end here: past `length` the steps read the
        next epoch, where the host stream `fn.from_dataset(ds)` would end. Scan
        `length` steps for one epoch.
        """
        if not isinstance(state, DatasetPosition):
            raise TypeError(
                f"step takes the DatasetPosition that init() or step() returned (or "
                f"fn.state_from_dict gave for {self.stream.describe_stage()}), got {state!r}."
            )
        position = jnp.asarray(state.position, self._static.mode.position_dtype)
        return self.get(position), DatasetPosition(cast(int, position + 1))

    def _one(self, position: Any) -> Any:
        mode = self._static.mode
        at = split(mode, position.astype(mode.unsigned), self.length, mode.top)
        return self._static.program(self.arrays, at)

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

    def tree_flatten(self) -> tuple[tuple[Any, ...], _Static]:
        return self.arrays, self._static

    @classmethod
    def tree_unflatten(cls, static: _Static, arrays: Sequence[Any]) -> JaxDataset:
        return cls(static, arrays)

    def __repr__(self) -> str:
        mode = self._static.mode
        return f"to_jax({mode.bits}-bit) of\n{self.dataset!r}"


def to_jax(ds: Dataset[Any]) -> JaxDataset:
    """Compiles a map-level pipeline into jax functions with the host's exact order.

    Supported: `range`; `source` over a jax or numpy array, a dict of them
    (rows), or a list or tuple of arrays of one shape and dtype (items);
    then seed, shuffle, window_shuffle, slice, repeat, mix, concatenate,
    select_from_datasets, map and map_with_index (with jax-traceable
    functions), batch (every batch full: `drop_remainder=True`, or a length
    the batch size divides) and random_map. A random_map function receives a
    `jax.random` key instead of a numpy Generator: the key of position
    `epoch * length + offset` is `jax.random.key(seed)` (as with 64-bit
    integers; seeds below 2**64) folded with the epoch
    (mod 2**32), then the offset's high and low 32-bit words. Its draws are
    the same on any device, process or resume, and in both integer modes,
    but not the host's numpy draws.

    With `jax_enable_x64` off, positions and values are int32 and every
    result is exact where it fits; what cannot be exact is refused here.

    Args:
        ds: A grainfn Dataset built from the stages above, or a `MapDataset` of
            the Grain API (its `.core`).

    Returns:
        A JaxDataset with `length`, `get_many`, `get`, `init` and `step`.

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
        >>> element, state = jax.jit(jds.step)(jds.init())
        >>> fn.state_to_dict(jds.stream, state)["state"]
        {'kind': 'DatasetPosition', 'position': 1}
    """
    data: Any = getattr(ds, "core", ds)  # a MapDataset of the Grain API holds its dataset
    if isinstance(data, Stream):
        raise NotOnDeviceError(
            f"to_jax cannot run the stream stage {data.describe_stage()!r}: a stream keeps its "
            "position in host cursors. Compile the map-level dataset before fn.from_dataset."
        )
    if not isinstance(data, Dataset):
        raise TypeError(f"to_jax takes a grainfn Dataset, got {ds!r} of type {type(ds).__name__}.")
    mode = current_mode()
    compiler = Compiler(mode, RULES)
    program = compiler.compile(data, mode.top)
    arrays = [jnp.asarray(array) for array in compiler.arrays]
    return JaxDataset(_Static(data, mode, program), arrays)
