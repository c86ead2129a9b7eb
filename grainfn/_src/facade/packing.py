"""Grain's packing datasets, `FirstFitPackIterDataset` and `BestFitPackIterDataset`.

Each class builds the core stream its `grainfn.fn` combinator would
(`first_fit_pack`, `best_fit_pack`) and wraps it; the packing lives in
`grainfn._src.packing`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from grainfn._src.core.stream import Stream
from grainfn._src.facade.dataset import IterDataset, iter_core
from grainfn._src.packing import PackOptions, best_fit_pack, first_fit_pack

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11 on
    from typing_extensions import Unpack


class _PackIterDataset(IterDataset[dict[str, Any]]):
    """A packing dataset: its subclass names the core combinator that packs."""

    _pack: ClassVar[Callable[..., Stream[dict[str, Any]]]]

    def __init__(
        self,
        parent: IterDataset[Any],
        *,
        length_struct: Mapping[str, Any],
        num_packing_bins: int,
        **options: Unpack[PackOptions],
    ) -> None:
        super().__init__(parent)
        stream = iter_core(parent, type(self).__name__)
        self._core = self._pack(length_struct, stream, num_packing_bins=num_packing_bins, **options)


class FirstFitPackIterDataset(_PackIterDataset):
    """Packs variable-length sequences into `num_packing_bins` bins, first-fit, as Grain does.

    Elements are dicts; each goes into the first bin where all its features
    of `length_struct` fit. When one fits no bin, the bins come out as
    elements (shuffled unless `shuffle_bins=False`) and it starts new bins.
    A feature `f` comes out padded to `length_struct[f]`, with
    `f_segment_ids` (1, 2, ... per packed sequence, 0 on padding) and
    `f_positions` (0, 1, ... within each sequence). Output and checkpoints
    behave as in Grain: a state holds the parent's state at the start of the
    current bins and two counters, and resuming packs those bins again.

    A feature may map to a tree of lengths (a dict, list or tuple nesting):
    each leaf is packed on its own and the feature comes out as a tree of
    that structure. Grain takes such a feature only in `meta_features`;
    grainfn also packs it as a sequence feature, with `f_segment_ids` and
    `f_positions` trees of the same structure.

    Args:
        parent: The IterDataset of dict elements to pack.
        length_struct: A dict from each feature to pack to its packed length,
            or to a tree of packed lengths.
        num_packing_bins: How many bins are packed at a time.
        **options: The `PackOptions`: `seed` (of the shuffle of each set of
            bins), `shuffle_bins`, `shuffle_bins_group_by_feature`,
            `meta_features`, `pack_alignment_struct`, `padding_struct` and
            `max_sequences_per_bin`, with Grain's meanings and defaults.

    Examples:
        >>> import numpy as np
        >>> import grainfn as grain
        >>> docs = grain.MapDataset.source([{"x": np.arange(1, n + 1)} for n in (3, 2, 4, 1)])
        >>> ds = FirstFitPackIterDataset(
        ...     docs.to_iter_dataset(), length_struct={"x": 5}, num_packing_bins=2, seed=1)
        >>> sorted(row["x"].tolist() for row in ds)
        [[1, 2, 3, 1, 2], [1, 2, 3, 4, 1]]
    """

    _pack = staticmethod(first_fit_pack)


class BestFitPackIterDataset(_PackIterDataset):
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

    _pack = staticmethod(best_fit_pack)
