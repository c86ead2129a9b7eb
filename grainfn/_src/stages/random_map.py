"""random_map: `fn(element, rng)` with draws that depend only on (seed, position).

Two kinds of draws (`rng`): a numpy Generator, Grain's (`grainfn._src.index.rng`),
or a `jax.random` key, the one `fn.to_jax` gives the same position on device
(`grainfn._src.index.jax_keys`). `None` passes through untouched, and an error
of the user function gets a note naming the stage and the position, as in map.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset, op_seed
from grainfn._src.core.compiler import NotOnDeviceError, Program, call_traced
from grainfn._src.core.dataset import ElementStage, function_name, read_each, set_length
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import Cursor, Stream
from grainfn._src.index import jax_keys, wide
from grainfn._src.index.device_ints import Split
from grainfn._src.index.jax_keys import JaxKeys
from grainfn._src.index.rng import ElementRng
from grainfn._src.stages.map import CountCursor, CountingStream, IndexedState

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler

RNGS = ("numpy", "jax")
"""What a random_map function draws from: a numpy Generator (Grain's), or a jax.random key."""


def element_rngs(seed: int, rng: str, length: int) -> ElementRng | JaxKeys:
    """The per-position draws of a random_map: `at(index)` gives the Generator or key."""
    return ElementRng(seed) if rng == "numpy" else JaxKeys(seed, length)


def _rng_suffix(rng: str) -> str:
    return "" if rng == "numpy" else f", rng={rng}"


@dataclasses.dataclass(frozen=True, repr=False)
class RandomMappedDataset(ElementStage[Any]):
    """`fn(element, rng)` where `rng` depends only on (seed, index)."""

    spec_rule = SpecRule.MAPPED
    random_stage = (
        RandomStage(
            "random_map",
            (ArgumentKind.RANDOM_MAP,),
            (("seed", ArgumentKind.OPTIONAL_SEED),),
            in_grain=True,
        ),
        RandomStage(  # jax keys, the device's draws: Grain has none
            "random_map",
            (ArgumentKind.KEY_MAP,),
            (("seed", ArgumentKind.SEED), ("rng", ArgumentKind.JAX_RNG)),
            name="random_map_jax",
        ),
    )
    calls_functions = True
    takes_wide_offsets = True  # its device form takes Wide offsets

    fn: Callable[[Any, Any], Any]
    seed: int
    rng: str = "numpy"
    """"numpy": a Generator, Grain's draws; "jax": a `jax.random` key, the device's draws."""
    rngs: ElementRng | JaxKeys = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)
        object.__setattr__(self, "rngs", element_rngs(self.seed, self.rng, self.length))

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(element, self.rngs.at(index))
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn, at = self.fn, self.rngs.at
        elements = self.parent._get_many(indices)
        try:
            return [None if e is None else fn(e, at(i)) for e, i in zip(elements, indices.tolist())]
        except StopIteration:  # never out of a dataset: `_get` names it and its position
            pass
        return read_each(self, indices)

    def describe_stage(self) -> str:
        return f"random_map({function_name(self.fn)}, seed={self.seed}{_rng_suffix(self.rng)})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        stage = self.describe_stage()
        if self.rng != "jax":
            raise NotOnDeviceError(
                f"to_jax cannot run {stage!r}: its function takes a numpy Generator (Grain's "
                "form, the default), which jax cannot trace. For draws that are the same on "
                "host, host workers and device, pass rng='jax': fn.random_map(f, self, seed=..., "
                "rng='jax') gives f a jax.random key on both."
            )
        parent, fn, seed = compiler.compile(self.parent, bound), self.fn, self.seed

        import jax

        # The key is index math: its words are resolved with the position's addresses.
        impl = jax.random.key_impl(jax_keys.seed_key(seed))

        def resolve(arrays: Sequence[Any], at: Split) -> tuple[Any, Any]:
            return jax.random.key_data(device_key(seed, at)), parent.resolve(arrays, at)

        def read(arrays: Sequence[Any], where: tuple[Any, Any]) -> Any:
            words, inside = where
            key = jax.random.wrap_key_data(words, impl=impl)
            return call_traced(stage, fn, parent.read(arrays, inside), key)

        return Program(resolve, read)


@dataclasses.dataclass(frozen=True, repr=False)
class RandomMappedStream(CountingStream):
    """`fn(element, rng)`; the n-th element's rng depends only on (seed, n)."""

    spec_rule = SpecRule.MAPPED
    random_stage = RandomStage(
        "random_map",
        (ArgumentKind.RANDOM_MAP,),
        (("seed", ArgumentKind.OPTIONAL_SEED),),
        in_grain=True,
    )
    grain_state = GrainKeys("IterDataset.random_map", IndexedState, (("index_for_rng", "seen"),))
    draws_per_shard = True

    fn: Callable[[Any, Any], Any]
    seed: int
    draws: tuple[int, int] = (0, 1)
    """`(first, step)`: element `n` takes the draws of index `first + n * step`. Logical
    shard `i` of `k` takes `(i, k)`, so shards never repeat each other's draws (Grain's
    rule for the workers of a multi-threaded prefetch)."""
    rng: str = "numpy"
    """"numpy": a Generator, Grain's draws; "jax": a `jax.random` key of the count."""
    rngs: ElementRng | JaxKeys = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rngs", element_rngs(self.seed, self.rng, sys.maxsize))

    def open(self, state: IndexedState) -> Cursor:
        fn, at = self.fn, self.rngs.at
        first, step = self.draws
        if (first, step) == (0, 1):
            apply = lambda i, e: fn(e, at(i))  # noqa: E731 (the common case, kept cheapest)
        else:
            apply = lambda i, e: fn(e, at(first + i * step))  # noqa: E731
        return CountCursor(self.parent.open(state.parent), state.seen, apply, self.describe_stage())

    def describe_stage(self) -> str:
        first, step = self.draws
        shard = "" if (first, step) == (0, 1) else f", draws={first}::{step}"
        name = function_name(self.fn)
        return f"random_map({name}, seed={self.seed}{shard}{_rng_suffix(self.rng)})"


@toolz.curry
def random_map(
    fn: Callable[[Any, Any], Any], data: Data, *, seed: int | None = None, rng: str = "numpy"
) -> Data:
    """`fn(element, rng)` with draws that depend only on (seed, position).

    On a dataset the position is the index; on a stream it is the number of
    elements the stage has seen, as in Grain.

    With `rng="numpy"` (the default) `fn` gets a numpy Generator, and the
    draws are Grain's. With `rng="jax"` it gets a `jax.random` key, the one
    `fn.to_jax` gives the same position on device (see
    `grainfn._src.index.jax_keys`): the draws are the same on the host, in
    host workers and on device, so a run moves between them. Only that form
    runs on device; the host computes its keys with jax on the CPU.

    Examples:
        >>> from grainfn.fn import range
        >>> ds = random_map(lambda x, rng: x + rng.integers(100), range(3), seed=7)
        >>> bool(ds.get(1) == ds.get(1))
        True
        >>> import jax
        >>> from grainfn import fn
        >>> keyed = random_map(lambda x, key: x + jax.random.randint(key, (), 0, 100), range(3),
        ...                    seed=7, rng="jax")
        >>> bool(keyed.get(1) == fn.to_jax(keyed).get(1))
        True
    """
    validate.check_callable(fn, "random_map fn")
    if rng not in RNGS:
        raise ValueError(
            f"random_map rng must be one of {list(RNGS)} (a numpy Generator, Grain's draws; "
            f"or a jax.random key, the device's), got {validate.short_repr(rng)}."
        )
    limit = jax_keys.KEY_SEED_LIMIT if rng == "jax" else None
    if isinstance(data, Stream):
        seed = op_seed(seed, data, "random_map", limit=limit)
        return RandomMappedStream(data, fn, seed, rng=rng)
    ds = as_dataset(data, "random_map")
    return RandomMappedDataset(ds, fn, op_seed(seed, ds, "random_map", limit=limit), rng=rng)


def device_key(seed: int, at: Split) -> Any:
    """The `jax.random` key of the element at `at`, a Split on device (`jax_keys.element_key`)."""
    offset = at.offset
    if isinstance(offset, wide.Wide):  # 32-bit, past 2**32 - 1: the words are at hand
        high, low = offset
    else:
        high = (offset >> 32).astype(np.uint32) if offset.dtype.itemsize == 8 else np.uint32(0)
        low = offset.astype(np.uint32)
    return jax_keys.element_key(seed, at.epoch.astype(np.uint32), high, low)
