"""Grain's packing datasets, `FirstFitPackIterDataset` and `BestFitPackIterDataset`.

Each class builds the core stream its `grainfn.fn` combinator would
(`first_fit_pack`, `best_fit_pack`) and wraps it; the packing lives in
`grainfn._src.packing`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grainfn._src.facade.datasets import IterDataset
from grainfn._src.packing import best_fit_pack, first_fit_pack


class FirstFitPackIterDataset(IterDataset[dict[str, Any]]):
    """Packs variable-length sequences into `num_packing_bins` bins, first-fit, as Grain does.

    Elements are dicts; each goes into the first bin where all its features
    of `length_struct` fit. When one fits no bin, the bins come out as
    elements (shuffled unless `shuffle_bins=False`) and it starts new bins.
    A feature `f` comes out padded to `length_struct[f]`, with
    `f_segment_ids` (1, 2, ... per packed sequence, 0 on padding) and
    `f_positions` (0, 1, ... within each sequence). Output and checkpoints
    behave as in Grain: a state holds the parent's state at the start of the
    current bins and two counters, and resuming packs those bins again.

    Args:
        parent: The IterDataset of dict elements to pack.
        length_struct: A dict from each feature to pack to its packed length.
        num_packing_bins: How many bins are packed at a time.
        seed: Seeds the shuffle of each set of bins.
        shuffle_bins: Whether the bins of a set come out shuffled.
        shuffle_bins_group_by_feature: An output feature; the shuffled bins are
            sorted by its mean distinct nonzero value per bin first.
        meta_features: Features without segment ids and positions: packed and
            padded if in `length_struct`, else the list of the bin's values.
        pack_alignment_struct: Per feature, sequences in a bin start at multiples of this.
        padding_struct: Per feature, the padding value (default 0).
        max_sequences_per_bin: The most sequences one bin takes.

    Examples:
        >>> import numpy as np
        >>> import grainfn as grain
        >>> docs = grain.MapDataset.source([{"x": np.arange(1, n + 1)} for n in (3, 2, 4, 1)])
        >>> ds = FirstFitPackIterDataset(
        ...     docs.to_iter_dataset(), length_struct={"x": 5}, num_packing_bins=2, seed=1)
        >>> sorted(row["x"].tolist() for row in ds)
        [[1, 2, 3, 1, 2], [1, 2, 3, 4, 1]]
    """

    def __init__(
        self,
        parent: IterDataset[Any],
        *,
        length_struct: Mapping[str, int],
        num_packing_bins: int,
        seed: int = 0,
        shuffle_bins: bool = True,
        shuffle_bins_group_by_feature: str | None = None,
        meta_features: Sequence[str] = (),
        pack_alignment_struct: Mapping[str, int] | None = None,
        padding_struct: Mapping[str, Any] | None = None,
        max_sequences_per_bin: int | None = None,
    ) -> None:
        super().__init__(parent)
        self._core = first_fit_pack(
            length_struct,
            _stream_of(parent, type(self).__name__),
            num_packing_bins=num_packing_bins,
            seed=seed,
            shuffle_bins=shuffle_bins,
            shuffle_bins_group_by_feature=shuffle_bins_group_by_feature,
            meta_features=meta_features,
            pack_alignment_struct=pack_alignment_struct,
            padding_struct=padding_struct,
            max_sequences_per_bin=max_sequences_per_bin,
        )


class BestFitPackIterDataset(IterDataset[dict[str, Any]]):
    """Packs like `FirstFitPackIterDataset`, each sequence into the fullest bin where it fits.

    A bin's fullness is the sum over features of the cells it uses; ties go
    to the first bin. Arguments are those of `FirstFitPackIterDataset`.

    Examples:
        >>> import numpy as np
        >>> import grainfn as grain
        >>> docs = grain.MapDataset.source([{"x": np.arange(1, n + 1)} for n in (3, 4, 1, 2)])
        >>> ds = BestFitPackIterDataset(
        ...     docs.to_iter_dataset(), length_struct={"x": 5}, num_packing_bins=2,
        ...     shuffle_bins=False)
        >>> [row["x_segment_ids"].tolist() for row in ds]
        [[1, 1, 1, 2, 2], [1, 1, 1, 1, 2]]
    """

    def __init__(
        self,
        parent: IterDataset[Any],
        *,
        length_struct: Mapping[str, int],
        num_packing_bins: int,
        seed: int = 0,
        shuffle_bins: bool = True,
        shuffle_bins_group_by_feature: str | None = None,
        meta_features: Sequence[str] = (),
        pack_alignment_struct: Mapping[str, int] | None = None,
        padding_struct: Mapping[str, Any] | None = None,
        max_sequences_per_bin: int | None = None,
    ) -> None:
        super().__init__(parent)
        self._core = best_fit_pack(
            length_struct,
            _stream_of(parent, type(self).__name__),
            num_packing_bins=num_packing_bins,
            seed=seed,
            shuffle_bins=shuffle_bins,
            shuffle_bins_group_by_feature=shuffle_bins_group_by_feature,
            meta_features=meta_features,
            pack_alignment_struct=pack_alignment_struct,
            padding_struct=padding_struct,
            max_sequences_per_bin=max_sequences_per_bin,
        )


def _stream_of(parent: Any, what: str) -> Any:
    if not isinstance(parent, IterDataset):
        raise TypeError(
            f"{what} packs an IterDataset, got {parent!r} of type {type(parent).__name__}; "
            "read a MapDataset with .to_iter_dataset() first."
        )
    return parent.core
