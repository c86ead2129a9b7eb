"""into_dataset: stream maps and filters over a dataset read, moved into the dataset."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import assume, given, note, reject
from hypothesis import strategies as st

import grainfn.testing
from grainfn import fn
from grainfn._src.core.dataset import INFINITE
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.elastic.pushdown import into_dataset
from grainfn._src.stages.filter import FilteredDataset, FilteredStream
from grainfn._src.stages.map import MappedDataset

stream_maps_and_filters = st.lists(
    st.sampled_from(
        [fn.map(f) for f in grainfn.testing.MAPS.values()]
        + [fn.filter(f) for f in grainfn.testing.FILTERS.values()]
    ),
    min_size=1,
    max_size=3,
)


@given(grainfn.testing.datasets(), stream_maps_and_filters, st.booleans())
def test_maps_and_filters_moved_into_the_dataset_keep_the_elements_and_states(
    ds: fn.Dataset, stages: list[Any], allow_nones: bool
) -> None:
    assume(ds.length < INFINITE)  # a filter that drops every element of an endless one never ends
    stream = fn.from_dataset(ds, allow_nones=allow_nones)
    for stage in stages:
        stream = stage(stream)
    moved = into_dataset(stream)
    note(f"{stream!r}\n->\n{moved!r}")

    def run(s: fn.Stream) -> tuple[list[Any], list[Any]]:
        it = fn.iterate(s)
        elements, states = [], [it.state]
        try:
            for element in itertools.islice(it, 300):
                elements.append(repr(element))
                states.append(it.state)
        except (ValueError, TypeError):
            reject()  # the pipeline itself fails (a ragged batch inside it)
        return elements, states

    assert run(moved) == run(stream)


def test_a_map_and_a_filter_over_a_dataset_read_become_dataset_stages() -> None:
    ds = fn.range(10)
    moved = into_dataset(fn.map(str, fn.filter(lambda x: x % 3 == 0, fn.from_dataset(ds))))
    assert type(moved) is FromDatasetStream
    assert type(moved.dataset) is MappedDataset
    assert type(moved.dataset.parent) is FilteredDataset
    assert moved.dataset.parent.parent is ds
    assert list(fn.iterate(moved)) == ["0", "3", "6", "9"]


def test_a_filter_over_a_dataset_with_holes_stays_a_stream_stage() -> None:
    holed = fn.filter(lambda x: x % 2 == 0, fn.range(10))  # a dataset with holes
    stream = fn.filter(lambda x: x > 3, fn.from_dataset(holed))
    moved = into_dataset(stream)
    assert type(moved) is FilteredStream  # Grain's filter check counts per window
    assert list(fn.iterate(moved)) == [4, 6, 8]


def test_stages_over_a_read_that_passes_nones_stay_where_they_are() -> None:
    stream = fn.map(str, fn.from_dataset(fn.range(3), allow_nones=True))
    assert into_dataset(stream) == stream


def test_datasets_and_bare_reads_are_left_as_they_are() -> None:
    ds = fn.range(3)
    assert into_dataset(ds) is ds
    leaf = fn.from_dataset(ds)
    assert into_dataset(leaf) == leaf
