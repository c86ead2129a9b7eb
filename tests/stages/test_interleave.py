"""interleave: Grain's order over lists and datasets of datasets, resumable, with clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.parallel.mp_prefetch import PoolCursor, collect_leaves, with_leaves
from grainfn._src.stages.interleave import InterleavedDatasetsStream, InterleavedStream
from grainfn.experimental import InterleaveIterDataset
from grainfn.testing import assert_elements_equal, assert_resumable

from support import conformance

pytestmark = pytest.mark.grain


def shard(lib: Any, index: int, length: int, as_iter: bool) -> Any:
    ds = lib.MapDataset.range(100 * index, 100 * index + length)
    return ds.to_iter_dataset() if as_iter else ds


def reference(lengths: list[int], cycle_length: int) -> list[int]:
    """The interleave order, written as plainly as possible: slots visited in turn."""
    sources = [iter(range(100 * i, 100 * i + n)) for i, n in enumerate(lengths)]
    slots: list[Any] = [None] * min(cycle_length, len(sources))
    opened, turn, out = 0, 0, list[int]()
    while True:
        if slots[turn] is None:
            if opened < len(sources):
                slots[turn], opened = sources[opened], opened + 1
                continue
            if all(s is None for s in slots):
                return out
        else:
            element = next(slots[turn], None)
            if element is None:
                slots[turn] = None
            else:
                out.append(element)
        turn = (turn + 1) % len(slots)


@settings(max_examples=30)
@given(
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=6),
    cycle_length=st.integers(1, 7),
    kinds=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_a_list_of_datasets_interleaves_as_in_grain(
    lengths: list[int], cycle_length: int, kinds: list[bool]
) -> None:
    import grain as real

    def build(lib: Any, make: Any) -> Any:
        datasets = [shard(lib, i, n, kinds[i]) for i, n in enumerate(lengths)]
        return make(datasets, cycle_length=cycle_length)

    ours = list(build(grain, InterleaveIterDataset))
    assert_elements_equal(ours, list(build(real, real.experimental.InterleaveIterDataset)))
    assert ours == reference(lengths, cycle_length)


@settings(max_examples=20)
@given(
    lengths=st.lists(st.integers(0, 5), min_size=1, max_size=6),
    cycle_length=st.integers(1, 4),
    seed=st.integers(0, 2**31),
)
def test_a_map_dataset_of_datasets_interleaves_as_in_grain(
    lengths: list[int], cycle_length: int, seed: int
) -> None:
    import grain as real

    def build(lib: Any, make: Any) -> Any:
        def make_shard(i: int) -> Any:
            return shard(lib, i, lengths[i], as_iter=i % 2 == 1)

        datasets = lib.MapDataset.range(len(lengths)).shuffle(seed=seed).map(make_shard)
        return make(datasets, cycle_length=cycle_length, iter_buffer_size=2)

    ours = list(build(grain, InterleaveIterDataset))
    assert_elements_equal(ours, list(build(real, real.experimental.InterleaveIterDataset)))


def test_a_none_in_a_dataset_of_datasets_reads_as_an_empty_dataset() -> None:
    datasets = fn.map(lambda i: fn.range(10 * i, 10 * i + 2), fn.range(4))
    holes = fn.filter(lambda d: d.length and d.get(0) != 10, datasets)  # drops dataset 1
    assert list(fn.iterate(fn.interleave(2, holes))) == [0, 1, 20, 21, 30, 31]


def static() -> Any:
    shards = [fn.from_dataset(fn.range(10 * i, 10 * i + i)) for i in range(5)]
    shards[2] = fn.batch(2, fn.from_dataset(fn.shuffle(fn.range(9), seed=3)), batch_fn=list)
    return fn.interleave(2, shards)


def nested() -> Any:
    def make(i: int) -> Any:
        return fn.from_dataset(fn.filter(lambda x: x % 3, fn.range(10 * i, 10 * i + 2 * i)))

    return fn.map(lambda x: x + 1, fn.interleave(3, fn.map(make, fn.range(6))))


@pytest.mark.parametrize("make", [static, nested])
def test_interleave_resumes_at_any_element(make: Any) -> None:
    count = len(list(fn.iterate(make())))
    assert_resumable(make, max_elements=count + 1, resume_points=count + 2)


def test_prefetch_rebuilds_a_list_and_leaves_a_dataset_of_datasets_alone() -> None:
    a, b = fn.from_dataset(fn.range(3)), fn.from_dataset(fn.range(5))
    listed = fn.interleave(2, [a, b])
    leaves: list[Any] = []
    collect_leaves(listed, leaves)
    assert leaves == [a, b]
    rebuilt = with_leaves(listed, lambda leaf: fn.map(str, leaf))
    assert isinstance(rebuilt, InterleavedStream)
    assert rebuilt.components == (fn.map(str, a), fn.map(str, b))
    inner = fn.interleave(2, fn.map(lambda i: fn.range(i), fn.range(4)))
    outer = fn.zip([fn.map(str, inner), a])
    leaves = []
    collect_leaves(outer, leaves)
    assert leaves == [a]
    kept = with_leaves(outer, lambda leaf: FromDatasetStream(fn.range(1)))
    assert isinstance(kept.components[0].parent, InterleavedDatasetsStream)
    assert kept.components[0].parent is inner
    alone = fn.mp_prefetch(2, inner)  # no leaves for workers: no processes start
    cursor = alone.open(alone.init())
    assert not isinstance(cursor, PoolCursor)
    assert cursor.next_many(3) == [0, 0, 1]
    cursor.close()


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    shards = [grain.MapDataset.range(3)]
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"cycle_length must be a positive integer, got {bad}"):
            InterleaveIterDataset(shards, cycle_length=bad)
    with pytest.raises(TypeError, match=r"cycle_length must be a positive integer, got 1\.5"):
        InterleaveIterDataset(shards, cycle_length=1.5)  # type: ignore[arg-type]
    for option in ("num_make_iter_threads", "make_iter_buffer_size", "iter_buffer_size"):
        with pytest.raises(ValueError, match=f"{option} must be an integer >= 0, got -1"):
            InterleaveIterDataset(shards, cycle_length=1, **{option: -1})
    with pytest.raises(ValueError, match="interleave takes a non-empty list of grainfn datasets"):
        InterleaveIterDataset([], cycle_length=2)
    with pytest.raises(ValueError, match="dataset of datasets of length 0"):
        fn.interleave(2, fn.range(0))
    with pytest.raises(TypeError, match="IterDatasets or MapDatasets, got 5"):
        InterleaveIterDataset([grain.MapDataset.range(3), 5], cycle_length=2)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a stream"):
        fn.interleave(2, fn.from_dataset(fn.range(3)))
    not_datasets: Any = InterleaveIterDataset(grain.MapDataset.range(3), cycle_length=2)
    with pytest.raises(TypeError, match="elements are MapDatasets or IterDatasets, got an elem"):
        list(not_datasets)
    with pytest.raises(TypeError, match="element 0 of the dataset of datasets is 0 \\(int\\)"):
        list(fn.iterate(fn.interleave(2, fn.range(3))))


def test_a_state_of_another_interleave_is_refused() -> None:
    stream = fn.interleave(2, [fn.range(3), fn.range(4), fn.range(5)])
    state = stream.init()
    with pytest.raises(ValueError, match="do not fit an interleave of 2 slots over 3 datasets"):
        stream.check_state(state._replace(next_dataset=4))
    slots = state.components
    with pytest.raises(ValueError, match="one dataset in two slots"):
        stream.check_state(state._replace(components=(slots[0], slots[0])))
    with pytest.raises(ValueError, match=r"components\[1\].dataset is 2"):
        stream.check_state(state._replace(components=(slots[0], slots[1]._replace(dataset=2))))
    with pytest.raises(ValueError, match="must hold 2 slot states"):
        stream.check_state(state._replace(components=slots[:1]))


def test_describe_stage_names_the_interleave() -> None:
    assert static().describe_stage() == "interleave(cycle_length=2, 5 datasets)"
    lines = repr(nested()).splitlines()
    assert lines[1] == "  interleave(cycle_length=3, the datasets of a dataset)"
    assert lines[2].strip() == "map(nested.<locals>.make)  [length 6]"


test_conforms = conformance.conforms(
    conformance.Example(
        "interleave(cycle_length=2, 3 datasets)",
        lambda: fn.interleave(2, [fn.range(3), fn.range(10, 12), fn.range(20, 23)]),
    ),
)
