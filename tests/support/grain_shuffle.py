"""Where Grain's shuffle is not a permutation: its cipher is sized with a float log2."""

from __future__ import annotations

import math
from typing import Any

from grainfn._src.index import cipher
from grainfn._src.stages.shuffle import ShuffledDataset


def grain_block_bits(max_index: int) -> int:
    """Grain's block size: ceil(log2(max_index)) in doubles, rounded up to even, >= 16."""
    bits = math.ceil(math.log2(max_index))
    return min(64, max(16, bits + bits % 2))


def grain_is_broken(length: int) -> bool:
    """Whether Grain's shuffle of `length` elements repeats some (its block is a bit short)."""
    return length > 1 and grain_block_bits(length - 1) != cipher.block_bits(length - 1)


def grain_shuffle_is_not_a_permutation(ds: Any) -> bool:
    """Whether a shuffle above `ds` has a length Grain's float-sized cipher does not permute."""
    if isinstance(ds, ShuffledDataset) and grain_is_broken(ds.length):
        return True
    return any(grain_shuffle_is_not_a_permutation(p) for p in ds.parents)
