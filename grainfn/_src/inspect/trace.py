"""`trace`: which index of each stage an element of a dataset is read from.

Every map-level stage says, for one of its positions, which parent it reads
and at which index (`Dataset.trace_parent`), with the same pure index
functions it reads with. Following those answers from the last stage to a
source gives the element's path through shuffles, slices, repeats, mixes and
the rest.

A batch reads a run of consecutive parent indices: its row says which, and the
trace follows the first of them (the batch's element 0). A flat_map with
`max_fan_out` reads parent index `i // max_fan_out`. A stream has no fixed
index per element, so only datasets can be traced.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.stream import Stream
from grainfn._src.inspect.view import length_text


@dataclasses.dataclass(frozen=True)
class TraceStep:
    """One stage on an element's path.

    Attributes:
        stage: The stage's `describe_stage()` text.
        index: The index read at this stage (`>= length` is a later epoch).
        length: The stage's length.
        note: Which component a stage of several parents reads, the run of
            parent indices a batch reads, or the epoch of the index.
        dataset: The stage itself (not shown, not compared).
    """

    stage: str
    index: int
    length: int
    note: str = ""
    dataset: Any = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Trace:
    """The path of one element: a `TraceStep` per stage, from the last stage to the source.

    `str()` and `repr()` print it as a table.

    Attributes:
        steps: The rows, the traced dataset's own stage first.
    """

    steps: tuple[TraceStep, ...]

    @property
    def source_index(self) -> int:
        """The index read from the source at the end of the path."""
        return self.steps[-1].index

    @property
    def source(self) -> Dataset[Any]:
        """The source dataset at the end of the path: the element is `source.get(source_index)`."""
        source: Dataset[Any] = self.steps[-1].dataset
        return source

    def __str__(self) -> str:
        header = ("stage", "index", "length", "note")
        rows = [header] + [
            (s.stage, str(s.index), length_text(s.length), s.note) for s in self.steps
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(3)]
        lines = []
        for stage, index, length, note in rows:
            line = f"{stage:<{widths[0]}}  {index:>{widths[1]}}  {length:>{widths[2]}}  {note}"
            lines.append(line.rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def trace(ds: Dataset[Any], index: int) -> Trace:
    """The index each stage of `ds` reads for the element at `index`, down to the source.

    Args:
        ds: A grainfn Dataset (map-level: streams have no fixed indices).
        index: Any index `ds.get` takes: >= 0, and `>= ds.length` for later epochs.

    Returns:
        The path, one row per stage; `.source_index` is where the element
        comes from in the source.

    Raises:
        TypeError: for a stream, a non-integer index, or a stage that cannot
            say which index it reads.
        IndexError: for a negative index, an empty dataset, or an index past
            the positions a stage can address.

    Examples:
        >>> from grainfn import fn
        >>> ds = fn.map(str, fn.repeat(2, fn.shuffle(fn.range(4), seed=1)))
        >>> trace(ds, 6)
        stage             index  length  note
        map(str)              6       8
        repeat(2 epochs)      6       8
        shuffle(seed=1)       6       4  epoch 1
        range(0, 4, 1)        5       4  epoch 1
        >>> path = trace(ds, 6)
        >>> ds.get(6) == str(path.source.get(path.source_index))
        True
    """
    if isinstance(ds, (Stream, StreamIterator)):
        stream = ds.stream if isinstance(ds, StreamIterator) else ds
        raise TypeError(
            f"trace follows indices through map-level datasets, but {stream.describe_stage()!r} "
            "is a stream stage: its elements have no fixed index. Trace the dataset under its "
            "from_dataset stage (in the Grain API, the MapDataset before to_iter_dataset())."
        )
    if not isinstance(ds, Dataset):
        raise TypeError(
            f"trace takes a grainfn Dataset (or a MapDataset), got {ds!r} of type "
            f"{type(ds).__name__}."
        )
    index = validate.check_integer(index, "index")
    if index < 0:
        raise IndexError(
            f"trace index must be >= 0, got {index}; indices past the length are later epochs."
        )
    if ds.length == 0:
        raise IndexError(f"Cannot trace index {index} of an empty dataset:\n{ds!r}")
    steps: list[TraceStep] = []
    node: Any = ds
    while True:
        if node.transparent and len(node.parents) == 1:
            node = node.parents[0]  # a timing stage: no row of its own
            continue
        if not node.parents:
            epoch = _epoch(node, index)
            steps.append(TraceStep(node.describe_stage(), index, node.length, epoch, node))
            return Trace(tuple(steps))
        try:
            where = node.trace_parent(index)
        except OverflowError as error:
            raise IndexError(f"Cannot trace index {index}: {error}") from None
        notes = [_epoch(node, index)]
        if len(node.parents) > 1:
            notes.append(f"component {where.parent} of {len(node.parents)}")
        if where.size > 1:
            last = where.first + where.size - 1
            notes.append(f"reads {where.first}..{last}; following {where.first}")
        note = "; ".join(n for n in notes if n)
        steps.append(TraceStep(node.describe_stage(), index, node.length, note, node))
        node, index = node.parents[where.parent], where.first


def _epoch(node: Dataset[Any], index: int) -> str:
    if node.length >= INFINITE or index < node.length:
        return ""
    return f"epoch {index // node.length}"
