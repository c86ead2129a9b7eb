"""Grain's `index_shuffle` module: one position of a keyed permutation, the shuffle's own."""

from __future__ import annotations

from typing import TypeVar

from grainfn._src.index.shuffle import permute_index

T = TypeVar("T")


def index_shuffle(index: int, max_index: int, seed: int, rounds: int = 4) -> int:
    """The position of `index` in a keyed permutation of `[0, max_index]`, as Grain's.

    `rounds=4` is the permutation of one epoch of `MapDataset.shuffle`; any
    even number of rounds from 4 to 1024 gives Grain's permutation for it
    (`permute_index`).

    Examples:
        >>> sorted(index_shuffle(i, max_index=4, seed=7) for i in range(5))
        [0, 1, 2, 3, 4]
        >>> [index_shuffle(i, max_index=8, seed=33, rounds=6) for i in range(9)]
        [7, 5, 4, 1, 3, 6, 0, 8, 2]
    """
    return permute_index(index, max_index, seed, rounds)
