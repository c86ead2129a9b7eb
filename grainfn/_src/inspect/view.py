"""The pipeline as inspection sees it: stages, their parents, their timing, their seeds.

`view(pipeline)` folds the timing stages of a timed pipeline into the stages
they time, so that describing, drawing and reading statistics all walk the
same tree of `StageView`s, one per stage of the pipeline as it was built.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.stream import Stream
from grainfn._src.index.seeds import derive_seed
from grainfn._src.inspect.timing import Counter, TimedDataset, TimedStream

ACCEPTED = "a grainfn Dataset, Stream or StreamIterator"
"""What the core inspection functions take, for error messages."""


@dataclasses.dataclass(frozen=True, eq=False)
class StageView:
    """One stage of a pipeline, with what inspection shows about it.

    Attributes:
        stage: The Dataset or Stream stage itself.
        parents: The views of the stages it reads, timing stages folded away.
        counter: The stage's timing counter, if the pipeline is timed.
        note: A remark on how the stage is timed, if any.
    """

    stage: Any
    parents: tuple[StageView, ...]
    counter: Counter | None = None
    note: str = ""

    @property
    def pipeline_seed(self) -> int | None:
        """The seed a `seed` stage sets; None for any other stage."""
        seed: int | None = self.stage.pipeline_seed
        return seed

    @property
    def transparent(self) -> bool:
        """Whether the stage changes how the pipeline runs, not what it yields (`mp_prefetch`)."""
        return bool(self.stage.transparent)

    @property
    def label(self) -> str:
        """The stage's `describe_stage()` text."""
        text: str = self.stage.describe_stage()
        return text

    @property
    def length(self) -> int | None:
        """The length of a dataset stage; None for a stream stage."""
        return self.stage.length if isinstance(self.stage, Dataset) else None


def view(pipeline: Dataset[Any] | Stream[Any]) -> StageView:
    """The tree of `StageView`s of a (possibly timed) pipeline.

    Examples:
        >>> from grainfn import fn
        >>> root = view(fn.map(str, fn.range(3)))
        >>> root.label, [parent.label for parent in root.parents]
        ('map(str)', ['range(0, 3, 1)'])
    """
    done: dict[int, StageView] = {}

    def visit(node: Any) -> StageView:
        if id(node) not in done:
            if isinstance(node, (TimedDataset, TimedStream)):
                inner = visit(node.parent)
                note = getattr(node, "note", "") or inner.note
                done[id(node)] = dataclasses.replace(inner, counter=node.counter, note=note)
            else:
                done[id(node)] = StageView(node, tuple(visit(p) for p in node.parents))
        return done[id(node)]

    return visit(pipeline)


def as_pipeline(value: Any, what: str, accepted: str = ACCEPTED) -> Dataset[Any] | Stream[Any]:
    """The pipeline of a Dataset, a Stream or a StreamIterator (its stream).

    Raises:
        TypeError: for anything else, naming the value and what is `accepted`.
    """
    if isinstance(value, (Dataset, Stream)):
        return value
    if isinstance(value, StreamIterator):
        return value.stream
    raise TypeError(f"{what} takes {accepted}, got {value!r} of type {type(value).__name__}.")


def length_text(length: int) -> str:
    """A dataset length as shown: `inf` for an infinite one."""
    return "inf" if length >= INFINITE else str(length)


def seed_in_effect(node: StageView) -> tuple[int, tuple[str, ...]] | None:
    """The seed a random stage uses, and the `seed` stages it was derived from (if any).

    None for a stage without a seed of its own (and for `seed` stages).
    An explicit `seed=` leaves the tuple of sources empty.
    """
    seed = getattr(node.stage, "seed", None)
    if node.pipeline_seed is not None or not isinstance(seed, int) or isinstance(seed, bool):
        return None
    if derive_seed(node.parents) != seed:
        return seed, ()
    return seed, tuple(stage.label for stage in _seed_stages(node))


def _seed_stages(node: StageView) -> list[StageView]:
    """The `seed` stages `derive_seed` collects for `node`, in its order."""
    found: list[StageView] = []
    to_visit = deque(node.parents)
    while to_visit:
        current = to_visit.popleft()
        if current.pipeline_seed is not None:
            found.append(current)
        else:
            to_visit.extend(current.parents)
    return found


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits.

    Examples:
        >>> format_seconds(1.5), format_seconds(0.0123), format_seconds(4.2e-6)
        ('1.50 s', '12.3 ms', '4.20 µs')
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return (
                f"{seconds / scale:.3g} {unit}"
                if seconds / scale >= 10
                else (f"{seconds / scale:.2f} {unit}")
            )
    return f"{seconds * 1e9:.0f} ns"
