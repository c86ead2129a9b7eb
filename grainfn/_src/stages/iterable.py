"""from_iterable: a stream over any re-iterable Python object, positioned by its own iterators.

A Grain user's IterDataset with an `__iter__` of its own, or any object
`iter()` takes afresh each time, becomes a stream that composes with every
stage. Where the iterator `iter()` gives keeps its own state (it has
`get_state` and `set_state` of its own, as a Grain user's `DatasetIterator`
subclass does), the stage's state holds that state as is (`IterableState`),
and opening at it calls `set_state` on a fresh iterator: Grain's behaviour.
Any other iterator is positioned by the number of elements taken
(`IterablePosition`): opening at a state calls `iter()` again and steps over
that many, so it needs an iterable that gives the same elements each time (as
a dataset's iterator does). It reads in the parent process: `mp_prefetch` has
no dataset positions to hand to workers.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple

from grainfn._src.core import state as records
from grainfn._src.core.grain_state import Beneath, GrainState, OwnGrainState
from grainfn._src.core.stream import BaseCursor, Cursor, Stream


@records.register
class IterablePosition(NamedTuple):
    """State of `from_iterable` over iterators without a state: how many elements were taken."""

    taken: int


@records.register
class IterableState(NamedTuple):
    """State of `from_iterable` over iterators that keep their own: what `get_state()` gave.

    It must be JSON data (dicts with str keys, lists, str, int, float, bool,
    None) for the state to be written: see `grainfn._src.core.state.json_data`.
    """

    user_state: Any


def _read_grain_state(stream: Any, grains: Any, path: str, beneath: Beneath) -> IterableState:
    # Grain keeps the user iterator's own state as it is; opening the stage calls its set_state.
    return IterableState(copy.deepcopy(grains))


def _write_grain_state(stream: Any, record: Any, path: str, beneath: Beneath) -> Any:
    return copy.deepcopy(record.user_state)


@dataclasses.dataclass(frozen=True, repr=False)
class IterableStream(Stream[Any]):
    """The elements of `iter(iterable)`, afresh at each opening."""

    reads_in_parent = True  # no dataset positions for workers
    grain_state: ClassVar[GrainState | None] = OwnGrainState(
        "a user's own iterator", _read_grain_state, _write_grain_state
    )

    iterable: Iterable[Any]

    def init(self) -> IterablePosition:
        return IterablePosition(0)  # a fresh iterator, whatever its kind

    def open(self, state: IterablePosition | IterableState) -> Cursor:
        return _IterableCursor(self.iterable, state)

    def check_state(self, state: Any, path: str = "") -> None:
        expected = IterableState if isinstance(state, IterableState) else IterablePosition
        records.check_record(state, expected, self.describe_stage(), path)

    def describe_stage(self) -> str:
        return f"from_iterable({type(self.iterable).__qualname__})"


STATE_PROTOCOL_ONLY = "state_protocol_only"
"""The class attribute by which an iterator class says that the `get_state` and
`set_state` it defines are the protocol's, not a state of its own: grainfn's
iterator bases set `state_protocol_only = True` in their own class bodies (their
methods are placeholders, or read a grainfn pipeline's iterator), so that a
subclass iterating by itself that inherits them is positioned by counting."""


def keeps_own_state(iterator: Any) -> bool:
    """Whether `iterator` has `get_state` and `set_state` of its own.

    Methods a class defines for the protocol only (its body sets
    `state_protocol_only = True`, as grainfn's iterator bases do) do not
    count: a subclass of `grainfn.DatasetIterator` that defines `__next__`
    alone, or a grainfn pipeline's iterator, is positioned by counting.

    Examples:
        >>> class Counter:
        ...     def __init__(self): self.n = 0
        ...     def __next__(self): self.n += 1; return self.n
        ...     def get_state(self): return {"n": self.n}
        ...     def set_state(self, state): self.n = state["n"]
        >>> keeps_own_state(Counter()), keeps_own_state(iter([1, 2]))
        (True, False)
        >>> class Base(Counter):
        ...     state_protocol_only = True
        ...     def get_state(self): raise NotImplementedError
        ...     def set_state(self, state): raise NotImplementedError
        >>> class NextOnly(Base):
        ...     def __next__(self): return 1
        >>> keeps_own_state(NextOnly())
        False
    """
    return all(_own_method(type(iterator), name) for name in ("get_state", "set_state"))


def _own_method(cls: type, name: str) -> bool:
    """Whether the class in `cls`'s MRO that defines `name` defines it as a state of its own."""
    for klass in cls.__mro__:
        if name in vars(klass):
            protocol_only = vars(klass).get(STATE_PROTOCOL_ONLY, False) is True
            return callable(vars(klass)[name]) and not protocol_only
    return False


class _IterableCursor(BaseCursor):
    def __init__(self, iterable: Iterable[Any], state: IterablePosition | IterableState) -> None:
        self.name = type(iterable).__qualname__
        self.iterator = iter(iterable)
        self.own = keeps_own_state(self.iterator)
        self.taken = 0
        try:
            if isinstance(state, IterableState):
                self._restore(state.user_state)
            else:
                self._step_over(state.taken)
        except BaseException:
            self.close()
            raise

    def _restore(self, user_state: Any) -> None:
        if not self.own:
            raise ValueError(
                "The state holds the state of the iterable's own iterator, but iter() gives "
                f"a {type(self.iterator).__qualname__}, which has no get_state and set_state of "
                "its own: it is another iterable."
            )
        self.iterator.set_state(copy.deepcopy(user_state))  # type: ignore[attr-defined]

    def _step_over(self, taken: int) -> None:
        for _ in range(taken):  # the iterable gives the same elements each time
            try:
                next(self.iterator)
            except StopIteration:
                raise ValueError(
                    f"The state says {taken} elements were taken, but the iterable gives "
                    f"{self.taken}: it is another iterable, or not the same each time."
                ) from None
            self.taken += 1

    def next(self) -> Any:
        try:
            element = next(self.iterator)
        except StopIteration:  # the end of the iterable
            raise
        except Exception as error:  # the user's iterator: keeps its type, gains a note
            error.add_note(
                f"Raised by the iterator of from_iterable({self.name}), reading its element "
                f"{self.taken} (counting from 0)."
            )
            raise
        self.taken += 1
        return element

    def state(self) -> IterablePosition | IterableState:
        if self.own:  # a copy: the iterator may change the value it returned
            return IterableState(copy.deepcopy(self.iterator.get_state()))  # type: ignore[attr-defined]
        return IterablePosition(self.taken)

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if callable(close):
            close()


def from_iterable(iterable: Iterable[Any]) -> Stream[Any]:
    """A stream of `iter(iterable)`'s elements; its state is the iterator's own, or a count.

    When the iterator that `iter(iterable)` gives has `get_state` and
    `set_state` of its own, the state holds what its `get_state()` returns
    (`IterableState`; writing the state as a dict needs JSON data), and a
    restore calls `set_state` on a fresh iterator. Otherwise the state counts
    the elements taken (`IterablePosition`) and a restore steps over them.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.map(str, from_iterable([1, 2, 3]))
        >>> it = fn.iterate(stream)
        >>> next(it), it.state
        ('1', IterablePosition(taken=1))
        >>> list(fn.iterate(stream, it.state))
        ['2', '3']

        An iterable whose iterators keep their own state:

        >>> class Countdown:
        ...     def __init__(self, value): self.value = value
        ...     def __next__(self):
        ...         if self.value == 0: raise StopIteration
        ...         self.value -= 1
        ...         return self.value
        ...     def get_state(self): return {"value": self.value}
        ...     def set_state(self, state): self.value = state["value"]
        >>> class Countdowns:
        ...     def __iter__(self): return Countdown(4)
        >>> it = fn.iterate(from_iterable(Countdowns()))
        >>> next(it), it.state
        (3, IterableState(user_state={'value': 3}))
        >>> list(fn.iterate(from_iterable(Countdowns()), IterableState({"value": 2})))
        [1, 0]
    """
    if not isinstance(iterable, Iterable) or isinstance(iterable, (Stream, Iterator)):
        raise TypeError(
            "from_iterable takes an object iter() reads again from its start each time (a "
            f"list, a dataset), got {iterable!r}; an iterator can be read once only."
        )
    return IterableStream(iterable)
