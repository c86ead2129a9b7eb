"""The Stream record: iteration as a pure function of an explicit state.

A stream answers `init() -> state` and `step(state) -> (element, state)`. The
end is signalled one way only: `step` returns the `END` sentinel (and keeps
returning it for every later step). `step` never mutates anything, so stepping
from an old state repeats the same result.

For speed, iteration does not go through `step`: `open(state)` returns a
mutable cursor that reads blocks of positions at once and builds a state record
only when asked. `step` itself is `open`, one `next`, and `state`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Generic, Protocol

from typing_extensions import TypeVar

from grainfn._src.core import declarations
from grainfn._src.core import state as records
from grainfn._src.core.dataset import library_subclasses, pipeline_lines
from grainfn._src.core.grain_state import PARENTS, GrainState
from grainfn._src.core.loader_records import LoaderRecords
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import RandomStage
from grainfn._src.core.spec_rule import SpecRule

T = TypeVar("T")
S = TypeVar("S", default=Any)
"""A stream's state record (`LimitState[...]`, ...); `Stream[T]` leaves it open (Any)."""


class _End:
    """The type of `END`: the element `step` returns once a stream is exhausted."""

    _instance: _End | None = None

    def __new__(cls) -> _End:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "END"

    def __reduce__(self) -> str:
        return "END"


END = _End()


class Cursor(Protocol):
    """A mutable reader over a stream, private to one iteration.

    `atomic` says that a `next` that raises leaves the cursor where it was: its
    state unchanged, and the next `next` reads the same element again. A
    cursor that takes one element of an atomic child per element it returns,
    and changes itself only once it has it, is atomic; one that calls user
    functions or takes several elements is not (a StreamIterator recovers it).
    `reads_in_processes` says that the cursor itself hands reads to worker
    processes, which can die: a StreamIterator over such a cursor keeps the
    state after every element, so that its state after a worker's death needs
    no read (see `grainfn._src.core.iterator`).
    """

    atomic: bool
    reads_in_processes: bool

    def next(self) -> Any:
        """Returns the next element; raises StopIteration at the end."""
        ...

    def next_many(self, count: int) -> list[Any]:
        """Returns up to `count` next elements; fewer only at the end."""
        ...

    def state(self) -> Any:
        """The state record after the elements returned so far."""
        ...

    def start_prefetch(self) -> None:
        """Starts reading ahead in the background, where the pipeline reads with threads."""
        ...

    def close(self) -> None:
        """Releases the threads or processes the cursor holds."""
        ...


class BaseCursor:
    """Defaults: `next_many` in terms of `next`; prefetch and close reach the `children`."""

    atomic = False
    reads_in_processes = False

    def next(self) -> Any:
        raise NotImplementedError

    def next_many(self, count: int) -> list[Any]:
        out = []
        try:
            for _ in range(count):
                out.append(self.next())
        except StopIteration:
            pass
        return out

    def children(self) -> tuple[Cursor, ...]:
        """The cursors this one reads from."""
        return ()

    def start_prefetch(self) -> None:
        for child in self.children():
            child.start_prefetch()

    def close(self) -> None:
        for child in self.children():
            child.close()


@declarations.declares_hooks
@dataclasses.dataclass(frozen=True, repr=False)
class Stream(Generic[T, S]):
    """A stream of elements `T` with explicit iteration state `S`. Build one with `grainfn.fn`."""

    # The declarations a stage class can make (see `grainfn._src.core.declarations`).
    transparent: ClassVar[bool] = False
    """Whether this stage changes how a pipeline runs, not what it yields.

    mp_prefetch, timing: no line in the pipeline's description, so states ignore it."""
    reads_in_parent: ClassVar[bool] = False
    """Whether this stage reads its data in the parent process even under `mp_prefetch`.

    A leaf whose reads are not map-level: Parquet files, interleaved datasets."""
    executes_leaves: ClassVar[bool] = False
    """Whether this stage reads its leaves elsewhere (worker processes, Ray actors).

    `mp_prefetch`, `ray_prefetch`: a nested one gives way to the outer one, and
    elastic shards and timing look through it."""
    opens_as_parent: ClassVar[bool] = False
    """Whether opening it opens its parent at the same state, and nothing else.

    The pipeline options, read when the pipeline is opened: elastic reads look through it."""
    draws_per_shard: ClassVar[bool] = False
    """Whether each logical shard of it draws random numbers of its own.

    Shard `i` of `k` takes those of indices `i, i + k, ...` (its field `draws`), as
    Grain's workers do."""
    spec_rule: ClassVar[SpecRule] = SpecRule.UNKNOWN
    """How `grainfn.fn.element_spec` infers this stage's elements.

    A member of `SpecRule`, done by `grainfn._src.inspect.element_spec.RULES`
    (UNKNOWN: it cannot)."""
    grain_state: ClassVar[GrainState | None] = None
    """How Grain's state of this stage reads into its record and is written back.

    See `grainfn._src.core.grain_state`; None: Grain's state does not determine grainfn's."""
    next_index_rule: ClassVar[NextIndexRule | None] = None
    """How Grain's `get_next_index` and `set_next_index` cross this stage.

    A member of `NextIndexRule`, done by `grainfn._src.grain_states.next_index.RULES`
    (None: its position is not one index)."""
    loader_records: ClassVar[LoaderRecords | None] = None
    """How its states follow the records Grain's DataLoader state counts.

    See `grainfn._src.core.loader_records`; None: no DataLoader state is read through it
    (a `transparent` stage passes them on all the same)."""
    random_stage: ClassVar[RandomStage | tuple[RandomStage, ...] | None] = None
    """How `grainfn.testing`'s random pipelines draw this stage.

    See `grainfn._src.core.random_stage`; None: they do not draw it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Checks a new stage class's declarations when it is made (`declarations.check`)."""
        super().__init_subclass__(**kwargs)
        declarations.check(cls, Stream)

    @property
    def parents(self) -> tuple[Any, ...]:
        """The streams or datasets this one reads from."""
        return ()

    @property
    def pipeline_seed(self) -> int | None:
        """The seed a `seed` stage sets for downstream random stages; None elsewhere."""
        return None

    def init(self) -> S:
        """The state before the first element."""
        raise NotImplementedError

    def step(self, state: S) -> tuple[T | _End, S]:
        """Returns `(element, next state)`, or `(END, state)` once the stream is exhausted.

        The state may hold 0-d numpy or jax arrays (a state that went through `jax.jit`).
        """
        state = records.as_host(state)
        self.check_state(state)
        cursor = self.open(state)
        try:
            element = cursor.next()
        except StopIteration:
            return END, cursor.state()
        return element, cursor.state()

    def open(self, state: S) -> Cursor:
        """A fresh cursor starting at `state` (not validated: see `check_state`)."""
        raise NotImplementedError

    def check_state(self, state: Any, path: str = "") -> None:
        """Raises ValueError, naming the stage and field, unless `state` fits this stream."""
        raise NotImplementedError

    def most_delivered(self, state: S) -> int | None:
        """The most elements this stream can have returned at `state` (a checked state).

        None where the state sets no bound. A stage's own counters are checked
        against its parent's bound (`grainfn._src.core.state.check_at_most`):
        a counter past what the positions beneath it allow belongs to no run
        of this pipeline (a Grain state's `index_for_rng` of 10**12 over
        position 3, say), and would change the output silently.
        """
        return None

    def describe_stage(self) -> str:
        """One line naming this stage and its arguments, without its parents."""
        return type(self).__name__

    def moved_into_dataset(self, leaf: Any) -> Stream[Any] | None:
        """This stage moved into the dataset its parent `leaf` (a `from_dataset`) reads.

        The same elements and states, read as one dataset (`grainfn._src.elastic.pushdown`):
        a map or filter over `from_dataset(d)` is `from_dataset` of it over `d`. None where
        the stage has no dataset form, or does not move onto this one.
        """
        return None

    def grain_record(self, read: Any, path: str) -> Any:
        """The record at the position Grain's state of this stage names.

        `read` is the record built field by field from Grain's keys
        (`grain_state`, a `GrainKeys`). A stage whose Grain state names some positions its own
        way (the window or batch that just ended) overrides this; `path` names
        the state for its errors.
        """
        return read

    def __repr__(self) -> str:
        return "\n".join(pipeline_lines(self))


@dataclasses.dataclass(frozen=True, repr=False)
class OneParentStream(Stream[T, S]):
    """Base of stream stages with one parent stream."""

    parent: Stream[Any]

    @property
    def parents(self) -> tuple[Any, ...]:
        return (self.parent,)


@dataclasses.dataclass(frozen=True, repr=False)
class PassThroughStream(OneParentStream[T, Any]):
    """Base of stages whose state is their parent's state."""

    grain_state: ClassVar[GrainState | None] = PARENTS  # Grain's state is the parent's too

    def init(self) -> Any:
        return self.parent.init()

    def check_state(self, state: Any, path: str = "") -> None:
        self.parent.check_state(state, path)

    def most_delivered(self, state: Any) -> int | None:
        return self.parent.most_delivered(state)  # one element, or none, per parent element


@dataclasses.dataclass(frozen=True, repr=False)
class WrappingStream(OneParentStream[T, S]):
    """Base of stages whose state is `record(counter, parent state)`, the counter starting at 0."""

    record: ClassVar[type[Any]]

    def init(self) -> S:
        return self.record(0, self.parent.init())

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, self.record, self.describe_stage(), path)
        self.parent.check_state(state.parent, f"{path}.parent" if path else "parent")


def stage_kinds() -> list[type[Stream[Any]]]:
    """The stream stage classes grainfn's imported modules define, by qualified name.

    A user's own subclasses are left out: declarations on these describe the library.

    Examples:
        >>> from grainfn._src.stages.limit import LimitedStream
        >>> LimitedStream in stage_kinds()
        True
    """
    return library_subclasses(Stream)


def reads_in_processes(cursor: Cursor) -> bool:
    """Whether `cursor`, or a cursor it reads from, hands reads to worker processes."""
    if getattr(cursor, "reads_in_processes", False):
        return True
    children = getattr(cursor, "children", tuple)
    return any(reads_in_processes(child) for child in children())


def element_before(cursor: Cursor) -> str:
    """Where a cursor's last element was, for an error note: the state it ended at."""
    return f"the stream element that ends at {state_of(cursor)}"


def state_of(cursor: Cursor) -> str:
    return f"state {cursor.state()}"
