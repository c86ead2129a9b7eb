"""`grainfn.describe`, `trace`, `stage_stats`, `to_dot` and `draw` for facade objects too.

Each takes what its core function in `grainfn.fn` takes, and also a
MapDataset or IterDataset (its `.core`), a DatasetIterator, a DataLoader or a
DataLoaderIterator (the core stream they read), and passes it on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from grainfn._src.facade.data_loader import DataLoader, DataLoaderIterator
from grainfn._src.facade.dataset import DatasetIterator, IterDataset, MapDataset
from grainfn._src.inspect import graph, stats, tree, view
from grainfn._src.inspect import trace as tracing

ACCEPTED = (
    "a MapDataset, IterDataset, DatasetIterator, DataLoader, DataLoaderIterator, or a grainfn "
    "Dataset, Stream or StreamIterator"
)


def as_pipeline(value: Any, what: str) -> Any:
    """The core dataset or stream behind `value`.

    Raises:
        TypeError: for anything else, naming the value and what is accepted.
    """
    if isinstance(value, (MapDataset, IterDataset)):
        return value.core
    if isinstance(value, DataLoaderIterator):
        value = value.dataset_iterator
    if isinstance(value, DatasetIterator):
        core = getattr(value, "_core", None)
        if core is None:
            raise TypeError(
                f"{what} cannot see inside {type(value).__qualname__}: it defines its own "
                "iterator. Inspect a grainfn pipeline (an IterDataset's iterator) instead."
            )
        return core.stream
    if isinstance(value, DataLoader):
        return value.stream()
    return view.as_pipeline(value, what, ACCEPTED)


def describe(pipeline: Any, *, file: TextIO | None = None) -> None:
    """Prints the pipeline as a tree of stages, with lengths, seeds and (if timed) timing.

    Examples:
        >>> import grainfn as grain
        >>> grain.describe(grain.MapDataset.range(6).shuffle(seed=1).batch(2))
        batch(2, sort_keys=True)  [length 3]
        └─ shuffle(seed=1)  [length 6]
           └─ range(0, 6, 1)  [length 6]
    """
    tree.describe(as_pipeline(pipeline, "describe"), file=file)


def describe_text(pipeline: Any) -> str:
    """The tree `describe` prints, as a string."""
    return tree.describe_text(as_pipeline(pipeline, "describe_text"))


def trace(ds: Any, index: int) -> tracing.Trace:
    """The index each stage of a MapDataset (or core Dataset) reads for element `index`.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(10).shuffle(seed=1)
        >>> trace(ds, 2).source_index == ds[2]
        True
    """
    return tracing.trace(as_pipeline(ds, "trace"), index)


def stage_stats(pipeline: Any) -> tuple[stats.StageStats, ...]:
    """The per-stage timing of an iterator made with `py_debug_mode` on (or a timed pipeline)."""
    return stats.stage_stats(as_pipeline(pipeline, "stage_stats"))


def to_dot(pipeline: Any) -> str:
    """The pipeline as Graphviz DOT text."""
    return graph.to_dot(as_pipeline(pipeline, "to_dot"))


def draw(pipeline: Any, path: str | os.PathLike[str], *, format: str | None = None) -> Path:
    """Renders the pipeline graph to `path` with Graphviz's `dot` program."""
    return graph.draw(as_pipeline(pipeline, "draw"), path, format=format)


def save_pipeline(pipeline: Any, directory: str | os.PathLike[str]) -> Path:
    """Writes the pipeline's tree and graph to `pipeline-<n>.txt` and `.dot` in `directory`."""
    return graph.save_pipeline(as_pipeline(pipeline, "save_pipeline"), directory)
