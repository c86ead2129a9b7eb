"""from_iterable: a stream over any re-iterable Python object, positioned by how much it gave.

A Grain user's IterDataset with an `__iter__` of its own, or any object
`iter()` takes afresh each time, becomes a stream that composes with every
stage. Its state is the number of elements taken: opening at a state calls
`iter()` again and steps over that many, so it needs an iterable that gives
the same elements each time (as a dataset's iterator does). It reads in the
parent process: `mp_prefetch` has no dataset positions to hand to workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from grainfn._src.core import state as records
from grainfn._src.core.stream import BaseCursor, Cursor, Stream


@records.register
class IterablePosition(NamedTuple):
    """State of `from_iterable`: how many elements have been taken."""

    taken: int


@dataclasses.dataclass(frozen=True, repr=False)
class IterableStream(Stream[Any]):
    """The elements of `iter(iterable)`, afresh at each opening."""

    reads_in_parent = True  # no dataset positions for workers

    iterable: Iterable[Any]

    def init(self) -> IterablePosition:
        return IterablePosition(0)

    def open(self, state: IterablePosition) -> Cursor:
        return _IterableCursor(self.iterable, state.taken)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, IterablePosition, self.describe_stage(), path)

    def describe_stage(self) -> str:
        return f"from_iterable({type(self.iterable).__qualname__})"


class _IterableCursor(BaseCursor):
    def __init__(self, iterable: Iterable[Any], taken: int) -> None:
        self.iterator = iter(iterable)
        self.taken = 0
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
        element = next(self.iterator)
        self.taken += 1
        return element

    def state(self) -> IterablePosition:
        return IterablePosition(self.taken)

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if callable(close):
            close()


def from_iterable(iterable: Iterable[Any]) -> Stream[Any]:
    """A stream of `iter(iterable)`'s elements; its state counts them.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.map(str, from_iterable([1, 2, 3]))
        >>> it = fn.iterate(stream)
        >>> next(it), it.state
        ('1', IterablePosition(taken=1))
        >>> list(fn.iterate(stream, it.state))
        ['2', '3']
    """
    if not isinstance(iterable, Iterable) or isinstance(iterable, (Stream, Iterator)):
        raise TypeError(
            "from_iterable takes an object iter() reads again from its start each time (a "
            f"list, a dataset), got {iterable!r}; an iterator can be read once only."
        )
    return IterableStream(iterable)
