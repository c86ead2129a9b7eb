"""ConcatThenSplitIterDataset and BOSHandling: Grain's arguments and their rules.

The rows themselves, against Grain's, are tested with the core combinator in
tests/packing/test_concat_then_split.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn._src.facade.packing_concat_then_split import BOSHandling, ConcatThenSplitIterDataset
from grainfn.testing import assert_elements_equal


def documents(count: int = 30) -> Any:
    """Documents of 1 to 14 tokens, some exactly a row long."""

    def document(i: int) -> dict[str, Any]:
        return {"tokens": np.arange(1 + (i * 7919) % 14, dtype=np.int32) + 100 * i, "doc": i}

    return grain.MapDataset.range(count).map(document).to_iter_dataset()


def test_bos_handling_follows_grains_rules() -> None:
    parent = documents(3)
    with pytest.raises(
        TypeError, match=r"bos_handling must be a grainfn\.experimental\.BOSHandling"
    ):
        ConcatThenSplitIterDataset(parent, length_struct={"a": 4}, bos_handling="replace")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="take effect only with"):
        ConcatThenSplitIterDataset(parent, length_struct={"tokens": 4}, bos_token_id=3)
    with pytest.raises(ValueError, match="needs a bos_token_id"):
        ConcatThenSplitIterDataset(
            parent,
            length_struct={"tokens": 4},
            bos_handling=BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
        )
    unchanged = ConcatThenSplitIterDataset(  # no bos_features: nothing to replace, as in Grain
        parent,
        length_struct={"tokens": 4, "doc": 4},
        bos_handling=BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
        bos_token_id=9,
    )
    plain = ConcatThenSplitIterDataset(parent, length_struct={"tokens": 4, "doc": 4})
    assert_elements_equal(list(unchanged), list(plain))
