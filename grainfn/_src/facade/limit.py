"""Grain's `limit` transformation: LimitIterDataset, over `fn.limit`."""

from __future__ import annotations

from typing import TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import IterDataset, iter_core

T = TypeVar("T")


class LimitIterDataset(IterDataset[T]):
    """The first `count` elements of `parent`.

    Examples:
        >>> import grainfn as grain
        >>> list(LimitIterDataset(grain.MapDataset.range(9).to_iter_dataset(), count=3))
        [0, 1, 2]
    """

    def __init__(self, parent: IterDataset[T], count: int) -> None:
        super().__init__(parent)
        self._core = fn.limit(count, iter_core(parent, "LimitIterDataset"))
