"""Grain's `repeat` transformation of an IterDataset: RepeatIterDataset, over `fn.repeat`.

`MapDataset.repeat` is a method of `MapDataset`.
"""

from __future__ import annotations

from typing import TypeVar

from grainfn import fn
from grainfn._src.facade.dataset import IterDataset, iter_core

T = TypeVar("T")


class RepeatIterDataset(IterDataset[T]):
    """`parent` again from its start, `num_epochs` times or forever (None).

    Examples:
        >>> import grainfn as grain
        >>> list(RepeatIterDataset(grain.MapDataset.range(2).to_iter_dataset(), num_epochs=2))
        [0, 1, 0, 1]
    """

    def __init__(self, parent: IterDataset[T], num_epochs: int | None = None) -> None:
        super().__init__(parent)
        self._core = fn.repeat(num_epochs, iter_core(parent, "RepeatIterDataset"))
