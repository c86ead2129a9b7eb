"""Property testing of pipelines: hypothesis strategies and determinism assertions.

Needs `hypothesis` (installed with the `test` extra). Use the assertions on
your own pipelines:

>>> from grainfn import fn, testing
>>> def make():
...     ds = fn.map(lambda x: x * 2, fn.shuffle(fn.seed(0, fn.range(100))))
...     return fn.batch(8, fn.filter(lambda x: x % 3 != 0, fn.from_dataset(ds)))
>>> testing.assert_deterministic(make)
>>> testing.assert_resumable(make)

and the strategies to generate random pipelines:

>>> from hypothesis import given
>>> @given(testing.streams())
... def test_every_pipeline_resumes(stream):
...     testing.assert_resumable(lambda: stream, max_elements=50)
>>> test_every_pipeline_resumes()
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import iterate
from grainfn._src.testing.assertions import (
    assert_deterministic,
    assert_elements_equal,
    assert_resumable,
)
from grainfn._src.testing.specs import (
    FILTERS,
    MAPS,
    RANDOM_MAPS,
    add_one,
    build_dataset,
    build_device_dataset,
    build_stream,
    dataset_specs,
    device_dataset_specs,
    stream_specs,
    with_index,
)

__all__ = [
    "FILTERS",
    "MAPS",
    "RANDOM_MAPS",
    "add_one",
    "assert_deterministic",
    "assert_elements_equal",
    "assert_resumable",
    "build_dataset",
    "build_device_dataset",
    "build_stream",
    "dataset_specs",
    "datasets",
    "device_dataset_specs",
    "device_datasets",
    "stream_specs",
    "streams",
    "with_index",
]


def _builds(build: Any, spec: Any) -> Any:
    """The pipeline of `spec` if it builds and its first elements read; None otherwise."""
    try:
        pipeline = build(spec)
        if isinstance(pipeline, Dataset):
            # Positions, not elements: an infinite dataset whose filter drops
            # everything has no first 200 elements, and reading them never ends.
            pipeline.get_many(np.arange(min(pipeline.length, 200)))
        else:
            list(itertools.islice(iterate(pipeline), 200))
    except (ValueError, TypeError, OverflowError):
        return None
    return pipeline


def datasets() -> st.SearchStrategy[Any]:
    """Random valid map-level pipelines (grainfn Datasets) whose elements read without error."""
    return dataset_specs().map(lambda s: _builds(build_dataset, s)).filter(lambda d: d is not None)


def streams() -> st.SearchStrategy[Any]:
    """Random valid, finite stream pipelines (grainfn Streams) that read without error."""
    return stream_specs().map(lambda s: _builds(build_stream, s)).filter(lambda d: d is not None)


def device_datasets() -> st.SearchStrategy[Any]:
    """Random map-level pipelines that `fn.to_jax` runs.

    They are non-empty, built from jax-traceable functions, and readable on the host.
    """
    return (
        device_dataset_specs()
        .map(lambda s: _builds(build_device_dataset, s))
        .filter(lambda d: d is not None and d.length > 0)
    )
