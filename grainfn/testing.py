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
from collections.abc import Callable, Mapping
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
from grainfn._src.testing.device_specs import build_device_dataset, device_dataset_specs
from grainfn._src.testing.specs import (
    FILTERS,
    INTEGERS,
    MAPS,
    RANDOM_MAPS,
    Functions,
    add_one,
    build_dataset,
    build_stream,
    dataset_specs,
    stream_specs,
    with_index,
)

__all__ = [
    "FILTERS",
    "MAPS",
    "Functions",
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


def datasets(
    source: Dataset[Any] | st.SearchStrategy[Dataset[Any]] | None = None,
    *,
    maps: Mapping[str, Callable[[Any], Any]] | None = None,
    random_maps: Mapping[str, Callable[[Any, np.random.Generator], Any]] | None = None,
    filters: Mapping[str, Callable[[Any], bool]] | None = None,
) -> st.SearchStrategy[Any]:
    """Random valid map-level pipelines (grainfn Datasets) whose elements read without error.

    Args:
        source: What every pipeline reads: a dataset, or a strategy of datasets
            (a mix or concatenation draws several). By default, `fn.range` of
            1 to 40 integers.
        maps: The functions `map` stages use, by name. By default `MAPS`
            (on integers) without a `source`, and none with one.
        random_maps: The functions `random_map` stages use, `f(element, rng)`,
            by name; the same defaults (`RANDOM_MAPS`).
        filters: The predicates `filter` stages use, by name; the same defaults
            (`FILTERS`).

    With a `source`, `map_with_index` (whose function takes integers) is left
    out. The other stages (seed, shuffle, slice, repeat, mix, concatenate,
    batch) work on any element.

    Examples:
        >>> import numpy as np
        >>> from hypothesis import given, settings
        >>> from grainfn import fn
        >>> words = fn.source(["tea", "coffee", "water"])
        >>> @settings(max_examples=20, deadline=None)
        ... @given(datasets(words, maps={"upper": str.upper}))
        ... def test_my_pipelines(ds):
        ...     for element in fn.elements(ds, stop=min(ds.length, 30)):  # words, or batches
        ...         lower = set(np.char.lower(np.asarray(element)).ravel().tolist())
        ...         assert lower <= {"tea", "coffee", "water"}
        >>> test_my_pipelines()
    """
    functions, sources = _choices(source, maps, random_maps, filters)
    specs = dataset_specs(functions=functions, sources=sources)
    builds = specs.map(lambda s: _builds(lambda spec: build_dataset(spec, functions), s))
    return builds.filter(lambda d: d is not None)


def streams(
    source: Dataset[Any] | st.SearchStrategy[Dataset[Any]] | None = None,
    *,
    maps: Mapping[str, Callable[[Any], Any]] | None = None,
    random_maps: Mapping[str, Callable[[Any, np.random.Generator], Any]] | None = None,
    filters: Mapping[str, Callable[[Any], bool]] | None = None,
) -> st.SearchStrategy[Any]:
    """Random valid, finite stream pipelines (grainfn Streams) that read without error.

    The arguments are those of `datasets`: the streams read pipelines it makes.
    """
    functions, sources = _choices(source, maps, random_maps, filters)
    specs = stream_specs(functions=functions, sources=sources)
    builds = specs.map(lambda s: _builds(lambda spec: build_stream(spec, functions), s))
    return builds.filter(lambda d: d is not None)


def _choices(
    source: Any, maps: Any, random_maps: Any, filters: Any
) -> tuple[Functions, st.SearchStrategy[Any] | None]:
    """The functions and the source strategy `datasets` and `streams` draw from."""
    if source is None:
        sources = None
        default = INTEGERS
    elif isinstance(source, Dataset):
        sources, default = st.just(source), Functions({}, {}, {}, with_index=False)
    elif isinstance(source, st.SearchStrategy):
        sources, default = source, Functions({}, {}, {}, with_index=False)
    else:
        raise TypeError(
            f"source must be a grainfn Dataset or a hypothesis strategy of them, got {source!r}."
        )
    functions = Functions(
        default.maps if maps is None else dict(maps),
        default.random_maps if random_maps is None else dict(random_maps),
        default.filters if filters is None else dict(filters),
        with_index=default.with_index,
    )
    return functions, sources


def device_datasets() -> st.SearchStrategy[Any]:
    """Random map-level pipelines that `fn.to_jax` runs.

    They are non-empty, built from jax-traceable functions, and readable on the host.
    """
    return (
        device_dataset_specs()
        .map(lambda s: _builds(build_device_dataset, s))
        .filter(lambda d: d is not None and d.length > 0)
    )
