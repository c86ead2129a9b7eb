"""multithread_prefetch and ThreadPrefetchDatasetIterator against Grain 0.2.18.

`multithread_prefetch` cuts a pipeline into one shard per thread (strided at
the MapDataset under `to_iter_dataset`, or, with `sequential_slice`, contiguous
parts of its sources) and interleaves the shards: the order depends on the
number of threads, and must be Grain's for every count.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import grain
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import grainfn
from grainfn.testing import assert_elements_equal

from pipelines import build_grain_stream, stream_specs

pytestmark = pytest.mark.grain

MAX_ELEMENTS = 120


def read(module: Any, spec: tuple[Any, ...], threads: int, sequential: bool) -> Any:
    """The first elements, or the type of the error that building or reading raised."""
    try:
        ds = build_grain_stream(spec, module)
        ds = module.experimental.multithread_prefetch(ds, threads, 3, sequential_slice=sequential)
        with contextlib.closing(iter(ds)) as it:
            return list(itertools.islice(it, MAX_ELEMENTS))
    except (ValueError, TypeError) as error:
        return type(error)


ELEMENTWISE = {"seed", "shuffle", "map", "random_map", "map_with_index", "filter"}
"""Map-level stages whose length Grain reads from their parents when asked."""


def grain_cuts_sources(spec: tuple[Any, ...]) -> bool:
    """Whether Grain's sequential slicing reads this stream spec correctly.

    Grain cuts the sources in place, after the pipeline was built; stages that
    computed their length from their parents then (batch, mix, concatenate,
    slice, repeat) keep the old one, and read some elements twice or fail.
    """
    head = spec[0]
    if head[0] == "mix":  # a stream-level mix of stream specs
        return all(grain_cuts_sources(part) for part in head[1])
    dataset_head, *ops = head[1]
    return dataset_head[0] == "range" and all(op[0] in ELEMENTWISE for op in ops)


@given(stream_specs(), st.integers(0, 4), st.booleans())
def test_multithread_prefetch_matches_grain(
    spec: tuple[Any, ...], threads: int, sequential: bool
) -> None:
    note(f"spec = {spec!r}, {threads} threads, sequential_slice={sequential}")
    if sequential and threads > 1 and not grain_cuts_sources(spec):
        return  # see test_sequential_parts_of_a_concatenation_hold_each_element_once
    theirs = read(grain, spec, threads, sequential)
    ours = read(grainfn, spec, threads, sequential)
    if isinstance(theirs, type):
        assert isinstance(ours, type), f"Grain raised {theirs.__name__}, grainfn did not"
        return
    assert not isinstance(ours, type), f"grainfn raised {ours}"
    assert_elements_equal(ours, theirs)


def test_sequential_parts_of_a_concatenation_hold_each_element_once() -> None:
    def pipeline(module: Any) -> Any:
        parts = [module.MapDataset.range(3), module.MapDataset.range(10, 14)]
        ds = module.MapDataset.concatenate(parts).to_iter_dataset()
        return module.experimental.multithread_prefetch(ds, 2, 2, sequential_slice=True)

    assert sorted(pipeline(grainfn)) == [0, 1, 2, 10, 11, 12, 13]
    assert sorted(pipeline(grain)) != [0, 1, 2, 10, 11, 12, 13]  # Grain re-reads elements
    batched = grain.MapDataset.range(1).batch(1).to_iter_dataset()
    with pytest.raises(ValueError, match="Cannot batch 0 values"):  # Grain: an empty part
        list(grain.experimental.multithread_prefetch(batched, 2, 3, sequential_slice=True))
    ours = grainfn.MapDataset.range(1).batch(1).to_iter_dataset()
    cut = grainfn.experimental.multithread_prefetch(ours, 2, 3, sequential_slice=True)
    assert [b.tolist() for b in cut] == [[0]]


def test_a_thread_prefetch_iterator_goes_on_where_its_parent_stood() -> None:
    def pipeline(module: Any) -> Any:
        ds = module.MapDataset.range(50).seed(1).shuffle().to_iter_dataset()
        return ds.filter(lambda x: x % 3 != 0)

    outputs = []
    for module in (grain, grainfn):
        parent = iter(pipeline(module))
        head = [next(parent) for _ in range(5)]
        ahead = module.experimental.ThreadPrefetchDatasetIterator(parent, 4)
        rest = [next(ahead) for _ in range(10)]
        ahead.close()
        outputs.append((head, rest))
    assert outputs[0] == outputs[1]


def test_a_thread_prefetch_iterator_keeps_its_parents_states() -> None:
    ds = grainfn.MapDataset.range(40).seed(2).shuffle().to_iter_dataset().map(lambda x: x + 1)
    ahead = grainfn.experimental.ThreadPrefetchDatasetIterator(iter(ds), 8)
    for _ in range(7):
        next(ahead)
    state = ahead.get_state()
    rest = list(ahead)
    plain = iter(ds)
    plain.set_state(state)  # a state of the read-ahead iterator restores without it
    assert list(plain) == rest
    again = grainfn.experimental.ThreadPrefetchDatasetIterator(iter(ds), 2)
    again.set_state(state)
    assert list(again) == rest
    ahead.close()
    again.close()


def test_only_grainfn_iterators_can_be_read_ahead() -> None:
    with pytest.raises(TypeError, match="ThreadPrefetchIterDataset"):
        grainfn.experimental.ThreadPrefetchDatasetIterator(iter([1, 2]), 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefetch_buffer_size"):
        grainfn.experimental.ThreadPrefetchDatasetIterator(
            iter(grainfn.MapDataset.range(3).to_iter_dataset()), -1
        )
