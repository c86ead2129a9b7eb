"""What the combinators accept: one `as_stream`, one `as_dataset`, one check of a list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import grainfn
from grainfn import fn
from grainfn._src.core import arguments, reading
from grainfn._src.core.arguments import core_of
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream

STREAM_COMBINATORS: dict[str, Callable[[Any], Any]] = {
    "limit": lambda data: fn.limit(2, data),
    "cache": lambda data: fn.cache(data),
    "thread_prefetch": lambda data: fn.thread_prefetch(2, data),
    "mp_prefetch": lambda data: fn.mp_prefetch(0, data),
    "first_fit_pack": lambda data: fn.first_fit_pack({"x": 4}, data, num_packing_bins=2),
    "concat_then_split": lambda data: fn.concat_then_split({"x": 4}, data),
}
"""Stream combinators, each applied to `data` with fixed options."""


def sequences() -> Dataset[Any]:
    """Five elements that every combinator above takes: {"x": an int32 sequence}."""
    return fn.map(lambda i: {"x": np.arange(i % 3 + 1, dtype=np.int32)}, fn.range(5))


def test_both_import_paths_are_the_one_definition() -> None:
    assert arguments.as_stream is reading.as_stream
    assert arguments.as_dataset is reading.as_dataset


def test_limit_takes_a_dataset_as_from_dataset_reads_it() -> None:
    assert list(fn.iterate(fn.limit(2, fn.range(5)))) == [0, 1]
    assert fn.limit(2, fn.range(5)) == fn.limit(2, fn.from_dataset(fn.range(5)))


@pytest.mark.parametrize("name", sorted(STREAM_COMBINATORS))
def test_a_stream_combinator_reads_a_dataset_as_its_from_dataset(name: str) -> None:
    combinator = STREAM_COMBINATORS[name]
    lifted, explicit = combinator(sequences()), combinator(fn.from_dataset(sequences()))
    assert repr(lifted) == repr(explicit)
    expected = list(fn.iterate(explicit))
    got = list(fn.iterate(lifted))
    assert len(got) == len(expected) > 0
    for x, y in zip(got, expected):
        assert repr(x) == repr(y)


def test_as_stream_lifts_a_dataset_with_from_dataset() -> None:
    ds = fn.range(3)
    stream = arguments.as_stream(ds, "limit")
    assert isinstance(stream, FromDatasetStream)
    assert stream == fn.from_dataset(ds)
    already = fn.from_dataset(ds)
    assert arguments.as_stream(already, "limit") is already


@pytest.mark.parametrize("bad", [[1, 2], 3, "abc", None, np.arange(3)])
def test_a_stream_combinator_names_the_bad_value_and_what_it_takes(bad: Any) -> None:
    message = rf"^limit needs a grainfn Stream or Dataset, got .* of type {type(bad).__name__}\."
    with pytest.raises(TypeError, match=message):
        fn.limit(2, bad)
    with pytest.raises(TypeError, match=r"It takes a Stream, a Dataset .* or a to_jax value"):
        arguments.as_stream(bad, "cache")


def test_as_dataset_refuses_a_stream_and_names_anything_else() -> None:
    with pytest.raises(TypeError, match="shuffle needs random access"):
        arguments.as_dataset(fn.from_dataset(fn.range(3)), "shuffle")
    with pytest.raises(TypeError, match=r"shuffle expects a grainfn Dataset .* of type list"):
        arguments.as_dataset([1, 2], "shuffle")


def test_core_of_unwraps_a_wrapper_and_returns_anything_else_as_it_is() -> None:
    ds = grainfn.MapDataset.range(4)
    iter_ds = ds.to_iter_dataset()
    assert core_of(ds) is ds.core and core_of(iter_ds) is iter_ds.core
    for value in (fn.range(3), fn.from_dataset(fn.range(3)), [1, 2], 3, None):
        assert core_of(value) is value


def test_core_of_passes_on_a_wrappers_type_error() -> None:
    class NoCore:
        @property
        def core(self) -> Any:
            raise TypeError("no core value")

    with pytest.raises(TypeError, match="no core value"):
        core_of(NoCore())


LIST_TAKERS: dict[str, Callable[[Any], Any]] = {
    "mix": lambda datasets: fn.mix(datasets),
    "concatenate": lambda datasets: fn.concatenate(datasets),
    "select_from_datasets": lambda datasets: fn.select_from_datasets(datasets, [(0, 0)]),
    "zip": lambda datasets: fn.zip(datasets),
    "interleave": lambda datasets: fn.interleave(2, datasets),
    "MapDataset.mix": lambda datasets: grainfn.MapDataset.mix(datasets),
    "MapDataset.concatenate": lambda datasets: grainfn.MapDataset.concatenate(datasets),
    "IterDataset.mix": lambda datasets: grainfn.IterDataset.mix(datasets),
    "ZipMapDataset": lambda datasets: grainfn.experimental.ZipMapDataset(datasets),
    "ZipIterDataset": lambda datasets: grainfn.experimental.ZipIterDataset(datasets),
}
"""Every function that takes a list of datasets, by the name its messages give."""


@pytest.mark.parametrize("name", sorted(LIST_TAKERS))
def test_a_list_of_datasets_is_checked_once_the_same_way(name: str) -> None:
    take = LIST_TAKERS[name]
    with pytest.raises(ValueError, match=rf"^{name} takes a non-empty list of .*, got \[\]\.$"):
        take([])
    with pytest.raises(TypeError, match=rf"^{name} takes a list of .*, got 'ab' \(a str\)\.$"):
        take("ab")
