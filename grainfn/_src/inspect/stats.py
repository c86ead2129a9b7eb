"""Per-stage timing statistics of a timed pipeline, as records.

A stage's total time is the wall time spent inside it, its parents included;
its self time is that minus its parents' totals: the time the stage itself
costs. Where parents run in other threads (`from_dataset(threads=...)`) their
time does not overlap the stage's, so the self time is clamped at zero.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from grainfn._src.inspect.view import StageView, as_pipeline, view


class StageStats(NamedTuple):
    """What one stage of a timed pipeline cost.

    Attributes:
        stage: The stage's `describe_stage()` text.
        depth: How many stages lie between it and the pipeline's last stage.
        calls: Reads of the stage (one per element, or per block of elements).
        elements: Elements it returned (for a dataset: positions it read).
        total_seconds: Wall time inside the stage, its parents included.
        self_seconds: `total_seconds` less the parents' totals (at least 0).
        note: A remark on how the stage was timed, if any.
        read_here: Of a `from_dataset` stage's elements, those read in the
            consumer's own thread (0 for other stages).
        read_elsewhere: Those its executor read: threads, worker processes
            or Ray actors (0 for other stages).
    """

    stage: str
    depth: int
    calls: int
    elements: int
    total_seconds: float
    self_seconds: float
    note: str = ""
    read_here: int = 0
    read_elsewhere: int = 0

    @property
    def mean_seconds(self) -> float:
        """Total time per element (0.0 before the first element)."""
        return self.total_seconds / self.elements if self.elements else 0.0


def stage_stats(pipeline: Any) -> tuple[StageStats, ...]:
    """The timing of every stage of a timed pipeline, from the last stage to the sources.

    Args:
        pipeline: A pipeline made by `timed` (or with `py_debug_mode` on), or
            a StreamIterator over one.

    Returns:
        One record per timed stage, in the order `describe` prints them.

    Raises:
        ValueError: if the pipeline is not timed.

    Examples:
        >>> from grainfn import fn
        >>> from grainfn._src.inspect.timing import timed
        >>> it = fn.iterate(timed(fn.from_dataset(fn.map(abs, fn.range(5)))))
        >>> _ = list(it)
        >>> [(s.stage, s.elements) for s in stage_stats(it)]
        [('from_dataset()', 5), ('map(abs)', 5), ('range(0, 5, 1)', 5)]
    """
    root = view(as_pipeline(pipeline, "stage_stats"))
    out: list[StageStats] = []
    for node, depth in _walk(root):
        if node.counter is not None:
            out.append(stats_of(node, depth))
    if not out:
        raise ValueError(
            "This pipeline is not timed. Time it with grainfn.fn.timed(pipeline) before "
            "iterating, or call grainfn.config.update('py_debug_mode', True) before making "
            "the iterator."
        )
    return tuple(out)


def stats_of(node: StageView, depth: int = 0) -> StageStats:
    """The statistics of one timed stage (`node.counter` must be set)."""
    counter = node.counter
    assert counter is not None
    total = counter.nanoseconds
    parents = sum(c.nanoseconds for c in _timed_parents(node))
    return StageStats(
        node.label,
        depth,
        counter.calls,
        counter.elements,
        total / 1e9,
        max(0, total - parents) / 1e9,
        node.note,
        counter.read_here,
        counter.read_elsewhere,
    )


def _timed_parents(node: StageView) -> list[Any]:
    """The counters of the nearest timed stages above `node`, each once."""
    counters: dict[int, Any] = {}
    to_visit = list(node.parents)
    while to_visit:
        parent = to_visit.pop()
        if parent.counter is not None:
            counters[id(parent.counter)] = parent.counter
        elif parent.transparent:
            to_visit.extend(parent.parents)
    return list(counters.values())


def _walk(root: StageView) -> list[tuple[StageView, int]]:
    """The stages in pre-order (as `describe` prints them), with their depths."""
    out: list[tuple[StageView, int]] = []

    def visit(node: StageView, depth: int) -> None:
        out.append((node, depth))
        for parent in node.parents:
            visit(parent, depth + 1)

    visit(root, 0)
    return out
