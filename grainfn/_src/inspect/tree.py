"""`describe`: a pipeline printed as a tree of stages, with lengths, seeds and timing.

One line per stage, the last stage first and each stage's parents below it,
joined by box-drawing connectors. A dataset stage shows its length (`inf` if
infinite); a random stage the seed it uses, and where that seed came from when
a `seed` stage upstream derived it; a stage of a timed pipeline its calls,
elements, total and self time. Unlike a pipeline's repr, the tree shows
`mp_prefetch` and its number of worker processes.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from grainfn._src.inspect import stats
from grainfn._src.inspect.view import (
    StageView,
    as_pipeline,
    format_seconds,
    length_text,
    seed_in_effect,
    view,
)


def describe_text(pipeline: Any) -> str:
    """The tree `describe` prints, as a string (no trailing newline).

    Args:
        pipeline: A grainfn Dataset, Stream, or StreamIterator (its stream).

    Examples:
        >>> from grainfn import fn
        >>> ds = fn.mix([fn.range(4), fn.shuffle(fn.range(6), seed=7)], [1, 1])
        >>> print(describe_text(fn.batch(2, ds)))
        batch(2)  [length 4]
        └─ mix(weights=[1.0, 1.0])  [length 8]
           ├─ range(0, 4, 1)  [length 4]
           └─ shuffle(seed=7)  [length 6]
              └─ range(0, 6, 1)  [length 6]
    """
    root = view(as_pipeline(pipeline, "describe"))
    lines: list[str] = []
    _lines(root, "", "", lines)
    return "\n".join(lines)


def describe(pipeline: Any, *, file: TextIO | None = None) -> None:
    """Prints `pipeline` as a tree of stages: lengths, seeds and, if timed, timing.

    Args:
        pipeline: A grainfn Dataset, Stream, or StreamIterator (its stream).
        file: Where to print; `sys.stdout` by default.

    Examples:
        >>> from grainfn import fn
        >>> describe(fn.shuffle(fn.seed(3, fn.range(5))))
        shuffle(seed=457190280)  [length 5; seed from seed(3)]
        └─ seed(3)  [length 5]
           └─ range(0, 5, 1)  [length 5]
    """
    print(describe_text(pipeline), file=file or sys.stdout)


def stage_line(node: StageView) -> str:
    """The line of one stage: its description, then length, seed and timing if any."""
    facts = stage_facts(node)
    line = node.label + (f"  [{'; '.join(facts)}]" if facts else "")
    if node.counter is not None:
        line += f"  | {timing_text(stats.stats_of(node))}"
    return line


def stage_facts(node: StageView) -> list[str]:
    """What a stage's line shows besides its description and timing: length, seed."""
    facts = []
    if node.length is not None:
        facts.append(f"length {length_text(node.length)}")
    seed = seed_in_effect(node)
    if seed is not None:
        value, sources = seed
        if f"seed={value}" not in node.label:
            facts.append(f"seed {value}")
        if sources:
            facts.append(f"seed from {', '.join(sources)}")
    return facts


def timing_text(record: stats.StageStats) -> str:
    """The timing part of a stage's line."""
    if not record.calls:
        text = "not called"
    else:
        text = (
            f"{record.calls} calls, {record.elements} elements, "
            f"total {format_seconds(record.total_seconds)}, "
            f"self {format_seconds(record.self_seconds)}"
        )
        if record.elements:
            text += f", {format_seconds(record.mean_seconds)}/element"
        if record.read_elsewhere:
            text += f"; {record.read_here} read here, {record.read_elsewhere} by the executor"
    return text + (f" ({record.note})" if record.note else "")


def _lines(node: StageView, first: str, rest: str, out: list[str]) -> None:
    """Appends `node`'s line (prefixed `first`) and its parents' (prefixed `rest`)."""
    out.append(first + stage_line(node))
    parents = node.parents
    for i, parent in enumerate(parents):
        last = i == len(parents) - 1
        _lines(parent, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "), out)
