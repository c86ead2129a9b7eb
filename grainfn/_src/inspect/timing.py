"""Opt-in per-stage timing: the same pipeline with a stopwatch around every stage.

`timed(pipeline)` rebuilds a dataset or stream with a transparent timing stage
above each of its stages. A timing stage passes calls, elements and states
through unchanged and adds, to a `Counter` it shares with every cursor made
from it, the calls, the elements and the wall time spent inside its stage
(parents included). Nothing changes in a pipeline that is not timed: the cost
is paid only by the timed copy.

Stages that run in `mp_prefetch` worker processes are not timed one by one:
the `from_dataset` stage reading them is, and its time is the time the parent
process waits for their blocks (see `grainfn.fn.timed`). A `from_dataset`
stage also counts who read its elements: the consumer's own thread (while
workers start, say, or where their work is too cheap to pay for its trip),
or the executor (threads, worker processes, Ray actors).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import numpy as np

from grainfn._src.core.dataset import Dataset, ParentIndex, set_length
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.rebuild import with_parents
from grainfn._src.core.stream import BaseCursor, Cursor, Stream

WORKERS_NOTE = "map-level stages below run in worker processes: timed here as one"
"""The note on a `from_dataset` stage whose dataset is read by `mp_prefetch` workers."""


class Counter:
    """Calls, elements and nanoseconds spent in one stage; safe to update from threads.

    Examples:
        >>> counter = Counter()
        >>> counter.add(3, 1_000)
        >>> counter.calls, counter.elements, counter.nanoseconds
        (1, 3, 1000)
    """

    def __init__(self) -> None:
        self.calls = 0
        self.elements = 0
        self.nanoseconds = 0
        self.read_here = 0  # elements a from_dataset stage read in the consumer's thread
        self.read_elsewhere = 0  # and those its executor read
        self._lock = threading.Lock()

    def add(self, elements: int, nanoseconds: int) -> None:
        """Records one call that produced `elements` elements in `nanoseconds`."""
        with self._lock:
            self.calls += 1
            self.elements += elements
            self.nanoseconds += nanoseconds

    def add_reads(self, here: int, elsewhere: int) -> None:
        """Records elements read in the consumer's thread (`here`) and by an executor."""
        with self._lock:
            self.read_here += here
            self.read_elsewhere += elsewhere

    def __getstate__(self) -> dict[str, int]:
        return {"calls": self.calls, "elements": self.elements, "nanoseconds": self.nanoseconds}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__()  # type: ignore[misc]
        self.calls, self.elements, self.nanoseconds = (
            state["calls"],
            state["elements"],
            state["nanoseconds"],
        )

    def __repr__(self) -> str:
        return f"Counter(calls={self.calls}, elements={self.elements}, ns={self.nanoseconds})"


@dataclasses.dataclass(frozen=True, repr=False)
class TimedDataset(Dataset[Any]):
    """The parent dataset, with the time spent reading it added to `counter`."""

    parent: Dataset[Any]
    counter: Counter = dataclasses.field(compare=False)
    transparent = True

    def __post_init__(self) -> None:
        set_length(self, self.parent.length)

    @property
    def parents(self) -> tuple[Dataset[Any], ...]:
        return (self.parent,)

    def _get(self, index: int) -> Any:
        start = time.perf_counter_ns()
        element = self.parent._get(index)
        self.counter.add(1, time.perf_counter_ns() - start)
        return element

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        start = time.perf_counter_ns()
        elements = self.parent._get_many(indices)
        self.counter.add(len(elements), time.perf_counter_ns() - start)
        return elements

    def trace_parent(self, index: int) -> ParentIndex:
        return ParentIndex(0, index)

    def describe_stage(self) -> str:
        return f"timed({self.parent.describe_stage()})"


@dataclasses.dataclass(frozen=True, repr=False)
class TimedStream(Stream[Any]):
    """The parent stream, with the time spent in its cursors' reads added to `counter`.

    The state is the parent's state: a timed stream resumes from, and saves,
    exactly the states of the stream it times.
    """

    parent: Stream[Any]
    counter: Counter = dataclasses.field(compare=False)
    note: str = ""
    transparent = True

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.parent,)

    def init(self) -> Any:
        return self.parent.init()

    def check_state(self, state: Any, path: str = "") -> None:
        self.parent.check_state(state, path)

    def open(self, state: Any) -> Cursor:
        return _TimedCursor(self.parent.open(state), self.counter)

    def describe_stage(self) -> str:
        return f"timed({self.parent.describe_stage()})"


class _TimedCursor(BaseCursor):
    def __init__(self, parent: Cursor, counter: Counter) -> None:
        self.parent, self.counter = parent, counter
        self.atomic = parent.atomic
        # A from_dataset cursor's block reader: who read what is counted from it.
        self.reader = getattr(parent, "reader", None)
        self.seen = (0, 0)  # its counts of elements read here and elsewhere, when last seen

    def next(self) -> Any:
        start = time.perf_counter_ns()
        try:
            element = self.parent.next()
        except StopIteration:
            self.counter.add(0, time.perf_counter_ns() - start)
            self._count_reads()
            raise
        self.counter.add(1, time.perf_counter_ns() - start)
        self._count_reads()
        return element

    def next_many(self, count: int) -> list[Any]:
        start = time.perf_counter_ns()
        elements = self.parent.next_many(count)
        self.counter.add(len(elements), time.perf_counter_ns() - start)
        self._count_reads()
        return elements

    def _count_reads(self) -> None:
        if self.reader is None:
            return
        now = (self.reader.read_here, self.reader.read_ahead)
        if now != self.seen:
            self.counter.add_reads(now[0] - self.seen[0], now[1] - self.seen[1])
            self.seen = now

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


def timed(pipeline: Any) -> Any:
    """The same pipeline with per-stage timing; read the numbers with `stage_stats` or `describe`.

    Every stage of a dataset or stream gets a stopwatch that counts calls,
    elements and the wall time spent inside it. Elements and states are those
    of `pipeline` (a state of one resumes the other), and `pipeline` itself is
    unchanged, so timing costs nothing unless asked for. The counters belong to
    the returned value: iterate it again, or resume it, and they keep adding
    up; call `timed` again for fresh ones.

    Limits: stages that `mp_prefetch` runs in worker processes are timed as
    one, inside the `from_dataset` stage that reads them (the time the parent
    waits for their blocks). Inner datasets an `interleave` makes while
    iterating are timed inside the interleave. Build new stages on the plain
    pipeline, not the timed one: timing stages count as steps when a `seed`
    upstream derives seeds.

    Args:
        pipeline: A grainfn Dataset or Stream.

    Returns:
        A value of the same kind yielding the same elements.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.map(lambda x: x + 1, fn.range(4)))
        >>> list(fn.iterate(timed(stream))) == list(fn.iterate(stream))
        True
    """
    if isinstance(pipeline, (TimedDataset, TimedStream)):
        return pipeline
    if not isinstance(pipeline, (Dataset, Stream)):
        raise TypeError(
            f"timed takes a grainfn Dataset or Stream, got {pipeline!r} of type "
            f"{type(pipeline).__name__}."
        )
    return _timed(pipeline, False, {})


def _timed(node: Any, in_workers: bool, done: dict[tuple[int, bool], Any]) -> Any:
    """`node` timed; `done` maps stages already timed to their copy, so a shared stage is one."""
    key = (id(node), in_workers)
    if key not in done:
        done[key] = _time_stage(node, in_workers, done)
    return done[key]


def _time_stage(node: Any, in_workers: bool, done: dict[tuple[int, bool], Any]) -> Any:
    if isinstance(node, Stream) and node.reads_in_parent:
        in_workers = False
    if isinstance(node, Stream) and node.executes_leaves and getattr(node, "num_workers", 1) > 0:
        in_workers = True  # mp_prefetch with workers, or ray_prefetch: leaves read elsewhere
    if in_workers and isinstance(node, FromDatasetStream):
        return TimedStream(node, Counter(), WORKERS_NOTE)
    parents = tuple(_timed(parent, in_workers, done) for parent in node.parents)
    rebuilt = with_parents(node, parents) or node  # one that cannot be is timed whole
    if node.transparent:
        return rebuilt  # mp_prefetch and the like: what they do is timed in their stages
    if isinstance(rebuilt, Dataset):
        return TimedDataset(rebuilt, Counter())
    return TimedStream(rebuilt, Counter())
