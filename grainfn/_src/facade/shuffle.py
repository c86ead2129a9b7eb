"""Grain's `shuffle` transformations of windows: the map and iter forms, over `fn.window_shuffle`.

`MapDataset.shuffle`, the global shuffle, is a method of `MapDataset`.
"""

from __future__ import annotations

from typing import TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.facade.dataset import IterDataset, MapDataset, map_core, stream_core

T = TypeVar("T")


class WindowShuffleMapDataset(MapDataset[T]):
    """A new permutation inside each window of `window_size` positions (`fn.window_shuffle`).

    Examples:
        >>> import grainfn as grain
        >>> ds = WindowShuffleMapDataset(grain.MapDataset.range(6), window_size=3, seed=0)
        >>> sorted(ds[:3]), sorted(ds[3:])
        ([0, 1, 2], [3, 4, 5])
    """

    def __init__(self, parent: MapDataset[T], *, window_size: int, seed: int) -> None:
        super().__init__(parent)
        self._core = fn.window_shuffle(
            window_size, map_core(parent, type(self).__name__), seed=seed
        )


class WindowShuffleIterDataset(IterDataset[T]):
    """`parent`'s elements shuffled within consecutive windows of `window_size`, as in Grain.

    Window `k` is permuted with seed `seed + k`. The state is the parent's
    state at the window's start and a count, so resuming re-reads the window.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(8).to_iter_dataset()
        >>> out = list(WindowShuffleIterDataset(ds, window_size=4, seed=0))
        >>> sorted(out[:4]), sorted(out[4:])
        ([0, 1, 2, 3], [4, 5, 6, 7])
    """

    def __init__(
        self, parent: IterDataset[T] | MapDataset[T], *, window_size: int, seed: int
    ) -> None:
        stream = stream_core(parent, "WindowShuffleIterDataset")
        super().__init__(parent)
        self._core = fn.window_shuffle(window_size, stream, seed=validate.check_seed(seed))
