"""cache: a stream's elements kept in memory, so that reading them again reads no parent.

The elements of a stream depend on its state alone, so a cache keyed by state
is exact: reading from a state met before (a repeat's next epoch, a restore,
a retry after an error) hands out the kept elements and states, and goes on
reading the parent only past the last one kept. The stage is transparent: the
same elements and the same states as the parent, with or without it.

The cache belongs to the stream value and to this process: iterators of the
same stream share it, and nothing of it goes into a state or to a worker.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import toolz

from grainfn._src.core import validate
from grainfn._src.core.arguments import as_stream
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream


class _Memory:
    """The elements read so far from some states of one stream, and the state after each.

    One dict entry per element, written in one store: a thread, or a signal
    handler that reads the stream again (`StreamIterator.state` inside a
    running `next()`), never sees an element without its state, and needs no lock.
    """

    def __init__(self) -> None:
        self.read: dict[Any, tuple[Any, Any]] = {}  # state -> (element read there, state after)
        self.ends: set[Any] = set()  # states the stream ends at

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Memory, ())  # a copy of the pipeline (a worker, a pickle) starts empty

    def add(self, before: Any, element: Any, after: Any) -> None:
        self.read.setdefault(before, (element, after))


@dataclasses.dataclass(frozen=True, repr=False)
class CachedStream(PassThroughStream):
    """The parent's elements, kept in memory by the state they are read from."""

    transparent = True  # the parent's elements and states
    spec_rule = SpecRule.PARENT

    memory: _Memory = dataclasses.field(default_factory=_Memory, compare=False)

    def open(self, state: Any) -> Cursor:
        return _CacheCursor(self.parent, state, self.memory)

    def describe_stage(self) -> str:
        return "cache()"


class _CacheCursor(BaseCursor):
    def __init__(self, parent: Stream[Any], state: Any, memory: _Memory) -> None:
        self.parent, self.memory = parent, memory
        self.current = state
        self.reader: Cursor | None = None  # the parent, opened once the cache runs out

    def next(self) -> Any:
        memory, state = self.memory, self.current
        known = memory.read.get(state) if validate.is_hashable(state) else None
        if known is not None and self.reader is None:
            element, self.current = known
            return element
        if self.reader is None:
            if validate.is_hashable(state) and state in memory.ends:
                raise StopIteration
            self.reader = self.parent.open(state)
        try:
            element = self.reader.next()
        except StopIteration:
            if validate.is_hashable(state):
                memory.ends.add(state)
            raise
        after = self.reader.state()
        if validate.is_hashable(state):
            memory.add(state, element, after)
        self.current = after
        return element

    def state(self) -> Any:
        return self.current

    def children(self) -> tuple[Cursor, ...]:
        return () if self.reader is None else (self.reader,)


@toolz.curry
def cache(stream: Stream[Any]) -> Stream[Any]:
    """`stream` with its elements kept in memory once read, by the state they were read from.

    Reading again from a state met before (the next epoch of a `repeat`, a
    restore) takes the kept elements instead of reading the parent. Elements
    and states are the stream's own.

    Examples:
        >>> from grainfn import fn
        >>> calls = []
        >>> stream = fn.map(lambda x: calls.append(x) or x, fn.from_dataset(fn.range(3)))
        >>> list(fn.iterate(fn.repeat(2, cache(stream))))
        [0, 1, 2, 0, 1, 2]
        >>> calls
        [0, 1, 2]
    """
    return CachedStream(as_stream(stream, "cache"))
