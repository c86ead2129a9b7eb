"""The host's rows of a map-level pipeline read as one dataset: elastic batches at batch speed.

When every logical shard is the same dataset read in order (a MapDataset
with no filter holes, no stream stage above it), row `q` of the host's part
of global batch `b` is a fixed position of that dataset: shard `s = first +
q // r`, its element `b * r + q % r`, which is position `s + L * (b * r +
q % r)`. So the host's batches are a map-level batch of those positions,
read in blocks like any batch, and the shards' states follow from `b`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from grainfn._src.core.blocks import BlockReader
from grainfn._src.core.dataset import Dataset, IndexStage, set_length, upstream_holes
from grainfn._src.core.reading import DatasetCursor, FromDatasetStream
from grainfn._src.core.state import DatasetPosition
from grainfn._src.core.stream import BaseCursor
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.reads import bare
from grainfn._src.stages.batch import BatchedDataset


@dataclasses.dataclass(frozen=True, repr=False)
class HostRows(IndexStage[Any]):
    """The host's rows of every global batch, in order, as positions of the unsliced dataset."""

    layout: Layout
    batches: int

    def __post_init__(self) -> None:
        set_length(self, self.batches * self.layout.shards_per_host * self.layout.rows_per_shard)

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        layout = self.layout
        rows = layout.rows_per_shard
        batch, row = np.divmod(indices, layout.shards_per_host * rows)
        shard, element = np.divmod(row, rows)
        return shard + layout.shards.start + layout.num_logical_shards * (batch * rows + element)

    def describe_stage(self) -> str:
        return f"host_rows({self.layout.rows.start}:{self.layout.rows.stop})"


def whole_dataset(components: Sequence[Any], layout: Layout) -> Dataset[Any] | None:
    """The one dataset every shard reads a slice of in order, if that is all the shards do."""
    parents = []
    for shard, component in zip(layout.shards, map(bare, components)):
        if type(component) is not FromDatasetStream or component.allow_nones:
            return None
        sliced: Any = component.dataset  # a cut has the fields `start`, `step` and `parent`
        if not sliced.logical_shard_cut or sliced.start != shard:
            return None
        if sliced.step != layout.num_logical_shards:
            return None
        parents.append(sliced.parent)
    if any(p is not parents[0] for p in parents) or upstream_holes(parents[0]) is not None:
        return None
    return parents[0]


class RowsCursor(BaseCursor):
    """Reads the host's batches of `HostRows` in blocks; its state is the shards' positions."""

    atomic = True  # a failed read leaves the reader at the first batch not returned

    def __init__(
        self,
        components: Sequence[Any],
        dataset: Dataset[Any],
        layout: Layout,
        step: int,
    ) -> None:
        rows, components = layout.rows_per_shard, [bare(c) for c in components]
        batches = min(c.dataset.length for c in components) // rows
        host_rows = HostRows(dataset, layout, batches)
        batched = BatchedDataset(host_rows, layout.rows.stop - layout.rows.start, True)
        leaf = components[0]
        reader = BlockReader(batched, step, leaf.threads, leaf.buffer)
        self.cursor, self.rows_per_shard = DatasetCursor(reader, False), rows
        self.shards = len(components)
        self.stopped = False

    def next(self) -> Any:
        try:
            return self.cursor.next()
        except StopIteration:
            self.stopped = True
            raise

    def positions(self) -> tuple[int, tuple[DatasetPosition, ...]]:
        """The global step, and each shard's position at it."""
        step = self.cursor.state().position
        return step, (DatasetPosition(step * self.rows_per_shard),) * self.shards

    def children(self) -> tuple[Any, ...]:
        return (self.cursor,)
