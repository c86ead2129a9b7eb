"""Grain's `cache` transformation: CacheIterDataset, over `fn.cache`."""

from __future__ import annotations

from typing import TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import IterDataset, iter_core

T = TypeVar("T")


class CacheIterDataset(IterDataset[T]):
    """`parent`'s elements kept in memory once read, so a repeat or a restore reads them again.

    The elements and states are `parent`'s own (`fn.cache`).

    Examples:
        >>> import grainfn as grain
        >>> ds = CacheIterDataset(grain.MapDataset.range(3).to_iter_dataset())
        >>> list(grain.experimental.RepeatIterDataset(ds, num_epochs=2))
        [0, 1, 2, 0, 1, 2]
    """

    def __init__(self, parent: IterDataset[T]) -> None:
        super().__init__(parent)
        self._core = fn.cache(iter_core(parent, "CacheIterDataset"))
