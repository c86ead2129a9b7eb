"""Packing: variable-length sequences packed into fixed-length rows, as in Grain.

`first_fit_pack` and `best_fit_pack` are the combinators (curried,
configuration first, data last) behind Grain's `FirstFitPackIterDataset` and
`BestFitPackIterDataset`; they yield what Grain yields for the same input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import toolz

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import as_stream
from grainfn._src.core.stream import Stream
from grainfn._src.packing.spec import PackOptions, PackSpec, pack_spec
from grainfn._src.packing.stream import PackedStream, PackState

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11 on
    from typing_extensions import Unpack

__all__ = [
    "PackOptions",
    "PackSpec",
    "PackState",
    "PackedStream",
    "best_fit_pack",
    "first_fit_pack",
]


@toolz.curry
def first_fit_pack(
    length_struct: Mapping[str, Any],
    data: Stream[Any] | Dataset[Any],
    *,
    num_packing_bins: int | None = None,
    **options: Unpack[PackOptions],
) -> Stream[dict[str, Any]]:
    """Packs dict elements into rows of `length_struct` cells per feature, first-fit.

    Elements are read into `num_packing_bins` bins, each element into the
    first bin where all its packed features fit, until one fits no bin; the
    bins then come out as rows (shuffled unless `shuffle_bins=False`) and that
    element starts the next block. A packed feature `f` of packed length `T`
    comes out as `f` (shape `(T, ...)`, padded), `f_segment_ids` (1, 2, ... per
    element of the row, 0 on padding) and `f_positions` (0, 1, ... within each
    element), both int32. Features not in `length_struct` or `meta_features`
    are dropped. Output equals Grain's `FirstFitPackIterDataset`.

    A feature of `length_struct` may be a tree (a dict, list or tuple nesting
    of packed lengths): each leaf is packed on its own, with its own capacity
    in the fit check, and the packed value is a tree of that structure (dicts'
    keys sorted). As a meta feature that is what Grain gives; otherwise
    `f_segment_ids` and `f_positions` are trees of the same structure too,
    one per leaf (Grain refuses such a feature). The elements' value of a
    nested feature must have its structure; its dicts may hold other keys,
    which are dropped.

    Args:
        length_struct: A dict from each feature to pack to its packed length,
            or to a tree of packed lengths.
        data: A stream of dicts (a dataset is read in order).
        num_packing_bins: How many bins a block packs into (required).
        **options: The `PackOptions`: `seed` (of the row shuffle of each block),
            `shuffle_bins`, `shuffle_bins_group_by_feature`, `meta_features`,
            `pack_alignment_struct`, `padding_struct`, `max_sequences_per_bin`.

    Returns:
        A stream of packed dicts, with keys sorted.

    Raises:
        ValueError: for a bad option, and while reading for an element longer
            than its packed length or missing a feature.

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> docs = fn.source([{"tokens": np.arange(1, n + 1)} for n in (3, 2, 4, 1)])
        >>> packed = first_fit_pack({"tokens": 5}, docs, num_packing_bins=2, shuffle_bins=False)
        >>> for row in fn.iterate(packed):
        ...     print(row["tokens"], row["tokens_segment_ids"], row["tokens_positions"])
        [1 2 3 1 2] [1 1 1 2 2] [0 1 2 0 1]
        [1 2 3 4 1] [1 1 1 1 2] [0 1 2 3 0]

        A nested feature: its leaves are packed each on its own.

        >>> pairs = fn.source(
        ...     [{"pair": {"q": np.arange(n), "a": np.arange(3 - n)}} for n in (1, 2)])
        >>> (row,) = fn.iterate(
        ...     first_fit_pack({"pair": {"q": 3, "a": 3}}, pairs, num_packing_bins=1))
        >>> row["pair"]["q"], row["pair_segment_ids"]["a"]
        (array([0, 0, 1]), array([1, 1, 2], dtype=int32))
    """
    return _packed("first_fit", length_struct, data, num_packing_bins, options)


@toolz.curry
def best_fit_pack(
    length_struct: Mapping[str, Any],
    data: Stream[Any] | Dataset[Any],
    *,
    num_packing_bins: int | None = None,
    **options: Unpack[PackOptions],
) -> Stream[dict[str, Any]]:
    """Packs dict elements like `first_fit_pack`, each into the fullest bin where it fits.

    A bin's fullness is the sum over packed features (over every leaf of a
    nested one) of the cells it uses; ties go to the first bin. Output
    equals Grain's `BestFitPackIterDataset`. Arguments are those of
    `first_fit_pack`.

    Examples:
        >>> import numpy as np
        >>> from grainfn import fn
        >>> docs = fn.source([{"tokens": np.arange(1, n + 1)} for n in (3, 4, 1, 2)])
        >>> packed = best_fit_pack({"tokens": 5}, docs, num_packing_bins=2, shuffle_bins=False)
        >>> [row["tokens_segment_ids"].tolist() for row in fn.iterate(packed)]
        [[1, 1, 1, 2, 2], [1, 1, 1, 1, 2]]
    """
    return _packed("best_fit", length_struct, data, num_packing_bins, options)


def _packed(
    strategy: str,
    length_struct: Mapping[str, Any],
    data: Any,
    num_packing_bins: int | None,
    options: PackOptions,
) -> PackedStream:
    what = f"{strategy}_pack"
    if num_packing_bins is None:
        raise TypeError(
            f"{what} needs num_packing_bins=N, the number of bins a block packs into "
            "(Grain's argument of the same name)."
        )
    stream = as_stream(data, what)
    return PackedStream(stream, pack_spec(strategy, length_struct, num_packing_bins, **options))
