"""Grain's `ConcatThenSplitIterDataset` and `BOSHandling`, over `concat_then_split`."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from grainfn._src.facade.dataset import IterDataset, iter_core
from grainfn._src.packing.concat_then_split import concat_then_split


class BOSHandling(enum.Enum):
    """Whether concat-then-split packing writes a BOS token, as in Grain."""

    DO_NOTHING = enum.auto()
    """Tokens are packed as they are."""

    REPLACE_FIRST_TOKEN_WITH_BOS = enum.auto()
    """The first token of every part of a sequence in a row becomes `bos_token_id`."""


class ConcatThenSplitIterDataset(IterDataset[dict[str, np.ndarray]]):
    """Sequences laid end to end and cut into rows of fixed lengths (`fn.concat_then_split`).

    Each element of `parent` is a flat dict of sequences. A row holds
    `length_struct[name]` tokens per feature, filled with consecutive
    elements; the element that does not fit is cut and its rest starts the
    next row. Token features also get `<name>_segment_ids` and
    `<name>_positions`. The rows are Grain's, and so is the state's meaning: a
    state saved after any row resumes with the next one, and a state Grain's
    `ConcatThenSplitIterDataset` wrote is read too.

    Args:
        parent: The elements, as an IterDataset.
        length_struct: Row length per feature; elements have exactly these
            features.
        meta_features: Features never cut (repeated in each part of an
            element), without segment ids or positions.
        split_full_length_features: If False, an element that fills a row by
            itself is not cut but becomes its own row.
        bos_handling: `BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS` writes
            `bos_token_id` over the first token of each part of the
            `bos_features`.
        bos_features: The features BOS handling applies to.
        bos_token_id: The BOS token; needed with REPLACE_FIRST_TOKEN_WITH_BOS.

    Examples:
        >>> import grainfn as grain
        >>> docs = grain.MapDataset.source([{"x": [1, 2, 3]}, {"x": [4, 5, 6]}])
        >>> rows = ConcatThenSplitIterDataset(docs.to_iter_dataset(), length_struct={"x": 4})
        >>> [row["x"].tolist() for row in rows]
        [[1, 2, 3, 4], [5, 6, 0, 0]]
    """

    def __init__(
        self,
        parent: IterDataset[Any],
        *,
        length_struct: Mapping[str, int],
        meta_features: Collection[str] = (),
        split_full_length_features: bool = True,
        bos_handling: BOSHandling = BOSHandling.DO_NOTHING,
        bos_features: Collection[str] = (),
        bos_token_id: int | None = None,
    ) -> None:
        super().__init__(parent)
        stream = iter_core(parent, "ConcatThenSplitIterDataset")
        if not isinstance(bos_handling, BOSHandling):
            raise TypeError(
                f"bos_handling must be a grainfn.experimental.BOSHandling, got {bos_handling!r}."
            )
        if bos_handling is BOSHandling.DO_NOTHING and (bos_token_id is not None or bos_features):
            raise ValueError(
                "bos_token_id and bos_features take effect only with "
                "bos_handling=BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS; set it, or leave them out."
            )
        if bos_handling is BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS:
            if bos_token_id is None:
                raise ValueError("bos_handling=REPLACE_FIRST_TOKEN_WITH_BOS needs a bos_token_id.")
            if not bos_features:  # as in Grain: nothing to replace
                bos_token_id = None
        self._core = concat_then_split(
            length_struct,
            stream,
            meta_features=meta_features,
            split_full_length_features=split_full_length_features,
            bos_features=bos_features,
            bos_token_id=bos_token_id,
        )
