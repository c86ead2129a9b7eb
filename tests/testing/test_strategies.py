"""grainfn.testing's strategies over the user's own source, element type and functions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn, testing
from grainfn._src.core.dataset import Dataset

RECORDS = fn.source([{"id": i, "text": "x" * i} for i in range(12)])


def with_length(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "length": len(record["text"])}


def keep_short(record: Any) -> bool:
    return record is None or len(record["text"]) < 8


def stages_of(node: Any) -> list[str]:
    return [node.describe_stage()] + [s for parent in node.parents for s in stages_of(parent)]


@settings(max_examples=40, deadline=None)
@given(testing.datasets(RECORDS, maps={"with_length": with_length}, filters={"short": keep_short}))
def test_datasets_over_a_source_of_records_use_only_its_functions(ds: Dataset[Any]) -> None:
    stages = stages_of(ds)
    assert any(stage.startswith("source(") for stage in stages)
    assert not any(stage.startswith(("range(", "map_with_index", "random_map")) for stage in stages)
    for element in fn.elements(ds, stop=min(ds.length, 40)):
        ids = np.asarray(element["id"]).ravel().tolist()  # a record, or a batch of them
        assert set(ids) <= set(range(12))
        if "length" in element and isinstance(element["id"], int):  # one record, mapped
            assert element["length"] == element["id"]


@settings(max_examples=25, deadline=None)
@given(testing.streams(st.sampled_from([RECORDS, fn.slice(slice(0, 5), RECORDS)])))
def test_streams_over_a_strategy_of_sources_resume(stream: Any) -> None:
    assert not any(stage.startswith("range(") for stage in stages_of(stream))
    testing.assert_resumable(lambda: stream, max_elements=30)


def test_a_source_that_is_not_a_dataset_is_refused() -> None:
    with pytest.raises(TypeError, match="source must be a grainfn Dataset"):
        testing.datasets([1, 2, 3])  # type: ignore[arg-type]
