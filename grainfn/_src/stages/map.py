"""Stages that call a user function on every element: map and map_with_index.

(random_map, which also hands the function draws, is `grainfn._src.stages.random_map`.)

`None` (a position a filter emptied) passes through them untouched, as in Grain.
An error of the user function gets a note naming the stage and the position,
and a StopIteration becomes a `UserStopIterationError` (`validate.note_user_error`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.arguments import Data, as_dataset
from grainfn._src.core.compiler import Program, call_traced, device_array
from grainfn._src.core.dataset import (
    ElementStage,
    function_name,
    read_each,
)
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.loader_records import ONE_TO_ONE
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import (
    BaseCursor,
    Cursor,
    PassThroughStream,
    Stream,
    WrappingStream,
    element_before,
    state_of,
)
from grainfn._src.index.device_ints import Split, require, whole_position

if TYPE_CHECKING:
    from grainfn._src.core.compiler import Compiler

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, repr=False)
class MappedDataset(ElementStage[Any]):
    """`fn(element)` for every element."""

    spec_rule = SpecRule.MAPPED
    random_stage = RandomStage("map", (ArgumentKind.MAP,), in_grain=True)
    loader_records = ONE_TO_ONE
    elementwise = True
    calls_functions = True
    takes_wide_offsets = True  # its device form takes Wide offsets

    fn: Callable[[Any], Any]

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(element)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn, elements = self.fn, self.parent._get_many(indices)
        try:
            return [None if e is None else fn(e) for e in elements]
        except StopIteration:  # never out of a dataset: `_get` names it and its position
            pass
        return read_each(self, indices)

    def describe_stage(self) -> str:
        return f"map({function_name(self.fn)})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        import jax

        parent, fn, stage = compiler.compile(self.parent, bound), self.fn, self.describe_stage()
        if not isinstance(fn, WithArrays):
            return parent.then(lambda arrays, element: call_traced(stage, fn, element))
        # The map's own arrays are leaves of the compiled value, as a source's are.
        leaves, structure = jax.tree_util.tree_flatten(fn.arrays)
        places = [compiler.add(device_array(leaf, stage)) for leaf in leaves]

        def finish(arrays: Sequence[Any], element: Any) -> Any:
            extra = jax.tree_util.tree_unflatten(structure, [arrays[i] for i in places])
            return call_traced(stage, fn.fn, element, extra)

        return parent.then(finish)


@dataclasses.dataclass(frozen=True, repr=False)
class IndexMappedDataset(ElementStage[Any]):
    """`fn(index, element)` for every element."""

    spec_rule = SpecRule.MAPPED
    random_stage = RandomStage("map_with_index", (ArgumentKind.INDEX_MAP,), in_grain=True)
    calls_functions = True

    fn: Callable[[int, Any], Any]

    def _get(self, index: int) -> Any:
        element = self.parent._get(index)
        if element is None:
            return None
        try:
            return self.fn(index, element)
        except Exception as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        fn = self.fn
        elements = self.parent._get_many(indices)
        try:
            return [None if e is None else fn(i, e) for e, i in zip(elements, indices.tolist())]
        except StopIteration:  # never out of a dataset: `_get` names it and its position
            pass
        return read_each(self, indices)

    def describe_stage(self) -> str:
        return f"map_with_index({function_name(self.fn)})"

    def device_program(self, compiler: Compiler, bound: int) -> Program:
        require(
            bound <= compiler.mode.top,
            self.describe_stage(),
            f"the index it passes reaches {bound}, beyond {compiler.mode.position_dtype}",
            compiler.mode,
        )
        parent, fn, stage = compiler.compile(self.parent, bound), self.fn, self.describe_stage()
        whole, dtype = whole_position(compiler.mode, self, bound), compiler.mode.position_dtype

        def resolve(arrays: Sequence[Any], at: Split) -> tuple[Any, Any]:
            return whole(at).astype(dtype), parent.resolve(arrays, at)

        def read(arrays: Sequence[Any], where: tuple[Any, Any]) -> Any:
            index, inside = where
            return call_traced(stage, fn, index, parent.read(arrays, inside))

        return Program(resolve, read)


@dataclasses.dataclass(frozen=True, repr=False)
class MappedStream(PassThroughStream):
    """`fn(element)` for every element."""

    spec_rule = SpecRule.MAPPED
    next_index_rule = NextIndexRule.PARENT
    random_stage = RandomStage("map", (ArgumentKind.MAP,), in_grain=True)
    loader_records = ONE_TO_ONE

    fn: Callable[[Any], Any]

    def open(self, state: Any) -> Cursor:
        return _MapCursor(self.parent.open(state), self.fn, self.describe_stage())

    def moved_into_dataset(self, leaf: Any) -> Stream[Any] | None:
        return dataclasses.replace(leaf, dataset=MappedDataset(leaf.dataset, self.fn))

    def describe_stage(self) -> str:
        return f"map({function_name(self.fn)})"


class _MapCursor(BaseCursor):
    def __init__(self, parent: Cursor, fn: Callable[[Any], Any], stage: str) -> None:
        self.parent, self.fn, self.stage = parent, fn, stage

    def next(self) -> Any:
        element = self.parent.next()
        if element is None:
            return None
        try:
            return self.fn(element)
        except Exception as error:
            validate.note_user_error(error, self.stage, element_before(self.parent))
            raise

    def next_many(self, count: int) -> list[Any]:
        fn = self.fn
        elements = self.parent.next_many(count)
        try:
            return [None if e is None else fn(e) for e in elements]
        except Exception as error:
            if len(elements) == 1:
                where = element_before(self.parent)
            else:
                where = f"one of the {len(elements)} stream elements up to {state_of(self.parent)}"
            validate.note_user_error(error, self.stage, where)
            raise

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@records.register(former_names=("CountState",))  # its former name, in states saved before
class IndexedState(NamedTuple, Generic[records.Parent]):
    """State of a stage that gives each element its index: the index of the next, `seen`.

    `map_with_index` passes the index to its function, `random_map` draws the
    element's random numbers from it.
    """

    seen: int
    parent: records.Parent


@dataclasses.dataclass(frozen=True, repr=False)
class CountingStream(WrappingStream[Any, IndexedState[Any]]):
    """Base of stages that count the elements they pass on, in a IndexedState."""

    record = IndexedState
    next_index_rule = NextIndexRule.COUNTER

    def check_state(self, state: Any, path: str = "") -> None:
        super().check_state(state, path)
        bound = self.parent.most_delivered(state.parent)
        records.check_at_most(state.seen, bound, path, "seen", "the parent's state")

    def most_delivered(self, state: IndexedState) -> int:
        return state.seen


@dataclasses.dataclass(frozen=True, repr=False)
class IndexMappedStream(CountingStream):
    """`fn(n, element)` for the n-th element of the stream."""

    spec_rule = SpecRule.MAPPED
    random_stage = RandomStage("map_with_index", (ArgumentKind.INDEX_MAP,), in_grain=True)
    grain_state = GrainKeys("IterDataset.map_with_index", IndexedState, (("counter", "seen"),))

    fn: Callable[[int, Any], Any]

    def open(self, state: IndexedState) -> Cursor:
        return CountCursor(
            self.parent.open(state.parent), state.seen, self.fn, self.describe_stage()
        )

    def describe_stage(self) -> str:
        return f"map_with_index({function_name(self.fn)})"


class CountCursor(BaseCursor):
    """Applies `fn(n, element)` to the n-th element; `None`s are counted but not mapped."""

    def __init__(
        self, parent: Cursor, count: int, fn: Callable[[int, Any], Any], stage: str
    ) -> None:
        self.parent, self.count, self.fn, self.stage = parent, count, fn, stage

    def next(self) -> Any:
        element = self.parent.next()
        index = self.count
        self.count += 1
        if element is None:
            return None
        try:
            return self.fn(index, element)
        except Exception as error:
            validate.note_user_error(error, self.stage, f"element {index} of its stream")
            raise

    def next_many(self, count: int) -> list[Any]:
        elements = self.parent.next_many(count)
        first, fn = self.count, self.fn
        self.count += len(elements)
        try:
            return [None if e is None else fn(first + i, e) for i, e in enumerate(elements)]
        except Exception as error:
            where = f"elements {first} to {self.count - 1} of its stream"
            validate.note_user_error(error, self.stage, where)
            raise

    def state(self) -> Any:
        return IndexedState(self.count, self.parent.state())

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, eq=False)
class WithArrays:
    """A map function that reads arrays besides its element: `fn(element, arrays)`.

    `arrays` is any pytree of arrays (a token stream, a lookup table). On
    the host they are passed as they are; `fn.to_jax` makes them leaves of
    the compiled value, so jitted code receives them as arguments rather
    than folding them into the program as constants.
    """

    fn: Callable[[Any, Any], Any]
    arrays: Any

    def __call__(self, element: Any) -> Any:
        return self.fn(element, self.arrays)

    @property
    def display_name(self) -> str:
        return f"{function_name(self.fn)} with arrays"


@toolz.curry
def map(fn: Callable[..., Any], data: Data, *, arrays: Any = None) -> Data:
    """`fn(element)` for every element, or `fn(element, arrays)` when `arrays` is given.

    `arrays` (a pytree of arrays, such as a flat token stream that `fn` cuts
    windows from) is passed to `fn` as it is on the host; on device,
    `fn.to_jax` keeps its arrays as leaves of the compiled value, passed
    into jitted code as arguments (see `WithArrays`).

    Examples:
        >>> from grainfn.fn import range
        >>> map(lambda x: x * x, range(4)).get_many([0, 1, 2, 3])
        [0, 1, 4, 9]
        >>> import numpy as np
        >>> tokens = np.arange(100, 112)
        >>> windows = map(lambda i, t: t[4 * i : 4 * i + 4], range(3), arrays=tokens)
        >>> windows.get(2).tolist(), windows.describe_stage()
        ([108, 109, 110, 111], 'map(<lambda> with arrays)')
    """
    validate.check_callable(fn, "map fn")
    if arrays is not None:
        fn = WithArrays(fn, arrays)
    if isinstance(data, Stream):
        return MappedStream(data, fn)
    return MappedDataset(as_dataset(data, "map"), fn)


@toolz.curry
def map_with_index(fn: Callable[[int, Any], Any], data: Data) -> Data:
    """`fn(index, element)`: the dataset index, or the element's count in a stream.

    Examples:
        >>> from grainfn.fn import source
        >>> map_with_index(lambda i, x: f"{x}{i}", source("ab")).get_many([0, 1, 2])
        ['a0', 'b1', 'a2']
    """
    validate.check_callable(fn, "map_with_index fn")
    if isinstance(data, Stream):
        return IndexMappedStream(data, fn)
    return IndexMappedDataset(as_dataset(data, "map_with_index"), fn)
