"""Grain's `rebatch` transformation: RebatchIterDataset, over `fn.rebatch`."""

from __future__ import annotations

from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import IterDataset, MapDataset, stream_core

T = TypeVar("T")


class RebatchIterDataset(IterDataset[Any]):
    """The rows of `parent`'s batches regrouped into batches of `batch_size`, as in Grain.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(7).to_iter_dataset().batch(3)
        >>> [b.tolist() for b in RebatchIterDataset(ds, batch_size=2)]
        [[0, 1], [2, 3], [4, 5], [6]]
    """

    def __init__(
        self,
        parent: IterDataset[Any] | MapDataset[Any],
        batch_size: int,
        drop_remainder: bool = False,
    ) -> None:
        stream = stream_core(parent, "RebatchIterDataset")
        super().__init__(parent)
        self._core = fn.rebatch(batch_size, stream, drop_remainder=drop_remainder)
