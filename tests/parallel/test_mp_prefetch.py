"""mp_prefetch's stage: which reads it hands to workers, its arguments, and its elements.

The worker pool itself is tested in test_processes.py, and its faults under
tests/faults/; here, the stage that chooses what the workers read.
"""

from __future__ import annotations

import pytest

from grainfn import fn
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.parallel.mp_prefetch import (
    PrefetchedStream,
    collect_leaves,
    mp_prefetch,
    with_leaves,
)


def _two_leaves() -> fn.Stream:
    left = fn.from_dataset(fn.map(lambda x: x * 10, fn.range(4)))
    right = fn.from_dataset(fn.range(3))
    return fn.zip([left, right])


def test_collect_leaves_finds_each_from_dataset_once_in_order() -> None:
    stream = _two_leaves()
    leaves: list[FromDatasetStream] = []
    collect_leaves(stream, leaves)
    collect_leaves(stream, leaves)  # a leaf already found is not added again
    assert [leaf.dataset.length for leaf in leaves] == [4, 3]


def test_with_leaves_replaces_each_leaf_and_keeps_the_stages_above() -> None:
    stream = _two_leaves()
    shorter = with_leaves(stream, lambda leaf: fn.from_dataset(fn.slice(slice(0, 1), leaf.dataset)))
    assert list(fn.iterate(shorter)) == [(0, 0)]
    assert list(fn.iterate(stream)) == [(0, 0), (10, 1), (20, 2)]


def test_a_nested_mp_prefetch_gives_way_to_the_outer_one() -> None:
    inner = mp_prefetch(2, fn.from_dataset(fn.range(5)))
    outer = fn.batch(2, inner)
    rebuilt = with_leaves(outer, lambda leaf: leaf)
    assert not any(isinstance(stage, PrefetchedStream) for stage in _stages(rebuilt))
    assert [batch.tolist() for batch in fn.iterate(rebuilt)] == [[0, 1], [2, 3], [4]]


def test_the_stage_is_transparent_and_executes_its_leaves() -> None:
    stream = mp_prefetch(2, fn.range(3))
    assert isinstance(stream, PrefetchedStream)
    assert PrefetchedStream.transparent and PrefetchedStream.executes_leaves
    assert (stream.num_workers, stream.buffer_per_worker, stream.adaptive) == (2, 1, True)


def test_zero_workers_reads_here_with_the_same_elements() -> None:
    data = fn.map(lambda x: x + 1, fn.range(6))
    assert list(fn.iterate(mp_prefetch(0, data))) == list(fn.iterate(fn.from_dataset(data)))


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"num_workers": -1}, ValueError, "num_workers"),
        ({"num_workers": 1.5}, TypeError, "num_workers"),
        ({"buffer_per_worker": 0}, ValueError, "buffer_per_worker"),
        ({"worker_init_fn": 3}, TypeError, "worker_init_fn"),
        ({"worker_timeout": -1.0}, ValueError, "worker_timeout"),
        ({"adaptive": "yes"}, TypeError, "adaptive"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    arguments: dict, error: type[Exception], message: str
) -> None:
    arguments = {"num_workers": 1, **arguments}
    workers = arguments.pop("num_workers")
    with pytest.raises(error, match=message):
        mp_prefetch(workers, fn.range(3), **arguments)


def test_workers_give_the_elements_and_states_of_the_stream_itself() -> None:
    data = fn.map(lambda x: x * x, fn.shuffle(fn.range(40), seed=3))
    plain = fn.batch(4, fn.from_dataset(data))
    pooled = fn.batch(4, mp_prefetch(2, data, adaptive=False))
    assert [b.tolist() for b in fn.iterate(pooled)] == [b.tolist() for b in fn.iterate(plain)]
    cursor = pooled.open(pooled.init())
    try:
        first = [cursor.next().tolist() for _ in range(3)]
        state = cursor.state()
    finally:
        cursor.close()
    rest = [b.tolist() for b in fn.iterate(plain, state)]
    assert first + rest == [b.tolist() for b in fn.iterate(plain)]


def _stages(stream: object) -> list[object]:
    found = [stream]
    for parent in getattr(stream, "parents", ()):
        found += _stages(parent)
    return found
