"""Index math of the window shuffle: a new permutation inside each window of an epoch.

Epoch `e` of a dataset of length `n` is cut into windows of `w` positions (the
last one may be shorter); window `k` of epoch `e` is permuted with the shuffle
bijection keyed by `seed + e * ceil(n / w) + k`. Full windows are permuted
exactly as Grain's `WindowShuffleMapDataset` does; a shorter last window is
permuted within itself, where Grain reads past the end of the epoch.
"""

from __future__ import annotations

import numpy as np

from grainfn._src.index.seeds import SEED_LIMIT
from grainfn._src.index.shuffle import shuffle_indices


def window_shuffle_indices(indices: np.ndarray, length: int, window: int, seed: int) -> np.ndarray:
    """Maps positions of a window-shuffled dataset to positions of its parent.

    Args:
        indices: Positions >= 0 as a numpy integer array (any epoch).
        length: Length of one epoch, >= 1.
        window: Window size, >= 1.
        seed: Seed of the first window, in [0, 2**32).

    Returns:
        Parent positions, int64, in the same epoch and window as each index.

    Examples:
        >>> out = window_shuffle_indices(np.arange(10), 10, 4, seed=0)
        >>> sorted(out[:4].tolist()), sorted(out[8:].tolist())
        ([0, 1, 2, 3], [8, 9])
    """
    indices = np.asarray(indices, dtype=np.int64)
    epoch, offset = np.divmod(indices, length)
    window_index, inside = np.divmod(offset, window)
    start = window_index * window
    size = np.minimum(window, length - start)
    windows_per_epoch = -(-length // window)
    keys = (seed + (epoch % SEED_LIMIT) * windows_per_epoch + window_index) % SEED_LIMIT
    out = np.empty_like(inside)
    # A block of positions spans few windows: permute each (key, size) group at once.
    groups = np.stack([keys, size])
    unique, inverse = np.unique(groups, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    for group in range(unique.shape[1]):
        mask = inverse == group
        key, group_size = int(unique[0, group]), int(unique[1, group])
        out[mask] = shuffle_indices(inside[mask], group_size, key)
    return epoch * length + start + out
