"""Grain's worker order (`grain_worker_order=True`) against Grain 0.2.18.

Grain's `mp_prefetch` and DataLoader outputs depend on their worker count:
each worker runs the pipeline over its own slice of the data (the DataLoader's
workers batch and filter their own records), and their elements come in turn.
With `grain_worker_order=True`, grainfn yields the same elements in the same
order, for any worker count and buffer size, reads the states Grain wrote,
and writes ones Grain reads. Its elements also come as Grain's workers hand
them over, through JAX's tree functions: dicts with sorted keys, at every
level (`worker_copy`); without it, grainfn's workers keep each element as it is.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import grain
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import grainfn
from grainfn import fn
from grainfn._src.loader.samplers import shard_length

from support.loader_specs import assert_same_elements, build_loader, loader_specs
from support.pipelines import build_grain_stream, stream_specs
from support.reading import read_to_end
from support.trees import assert_same_trees, element, every_kind, templates

pytestmark = [pytest.mark.grain, pytest.mark.usefixtures("absl_flags_parsed")]

LIMIT = 60


def with_workers(module: Any, ds: Any, workers: int, buffer: int = 1) -> Any:
    options = module.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=buffer)
    if module is grain:
        return ds.mp_prefetch(options)
    return ds.mp_prefetch(options, grain_worker_order=True)


def plain(element: Any) -> Any:
    return np.asarray(element).tolist()


def read(iterator: Any, limit: int = LIMIT) -> list[Any]:
    out = [plain(e) for e in itertools.islice(iterator, limit)]
    if hasattr(iterator, "close"):
        iterator.close()
    return out


def grain_reads(spec: tuple[Any, ...]) -> bool:
    """Whether Grain reads the pipeline without workers (some random specs it refuses)."""
    try:
        list(itertools.islice(iter(build_grain_stream(spec, grain)), LIMIT))
    except (ValueError, TypeError):
        return False
    return True


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(stream_specs(grain_only=True), st.integers(1, 3), st.integers(1, 3))
def test_random_pipelines_come_in_grains_worker_order(
    spec: tuple[Any, ...], workers: int, buffer: int
) -> None:
    note(f"spec = {spec!r}")
    assume(grain_reads(spec))
    theirs = read(iter(with_workers(grain, build_grain_stream(spec, grain), workers, buffer)))
    ours = read(iter(with_workers(grainfn, build_grain_stream(spec, grainfn), workers, buffer)))
    assert ours == theirs


@pytest.mark.slow
def test_the_order_is_grains_not_grainfns_own() -> None:
    ds = shuffled_batches(grainfn)
    own = read(iter(ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=2))))
    ordered = read(iter(with_workers(grainfn, ds, 2)))
    assert ordered == read(iter(with_workers(grain, shuffled_batches(grain), 2)))
    assert ordered != own  # each worker batches its own slice
    # The same elements (their draws differ: worker w draws for indices w, w + 2, ...).
    assert sorted(x // 100 for b in ordered for x in b) == sorted(x // 100 for b in own for x in b)


def shuffled_batches(module: Any) -> Any:
    """A shuffle, a filter, random draws and batches: every worker's slice differs."""
    return (
        module.MapDataset.range(60)
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .filter(lambda x: x % 3 != 0)
        .random_map(lambda x, rng: x * 100 + int(rng.integers(100)))
        .batch(4)
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("taken", [0, 3, 5])
def test_grains_mp_prefetch_state_continues_in_grainfn(workers: int, taken: int) -> None:
    theirs = iter(with_workers(grain, shuffled_batches(grain), workers))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    expected = read(theirs)
    ours = iter(with_workers(grainfn, shuffled_batches(grainfn), workers))
    ours.set_state(state)
    assert read(ours) == expected


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("taken", [0, 4])
def test_a_state_written_for_grains_mp_prefetch_continues_in_grain(
    workers: int, taken: int
) -> None:
    ours = iter(with_workers(grainfn, shuffled_batches(grainfn), workers))
    list(itertools.islice(ours, taken))
    written = ours.grain_state()
    theirs = iter(with_workers(grain, shuffled_batches(grain), workers))
    list(itertools.islice(theirs, taken))
    assert written == theirs.get_state()
    theirs.close()
    restored = iter(with_workers(grain, shuffled_batches(grain), workers))
    restored.set_state(written)
    assert read(restored) == read(ours)


def test_grainfn_states_in_grains_order_restore_with_and_without_workers() -> None:
    stream = fn.grain_worker_order(3, fn.from_dataset(fn.shuffle(fn.range(40), seed=2)))
    iterator = fn.iterate(fn.mp_prefetch(2, stream))
    head = list(itertools.islice(iterator, 11))
    state = iterator.state
    iterator.close()
    want = list(fn.iterate(stream))
    assert head + list(fn.iterate(stream, state)) == want
    assert sorted(want) == list(range(40))  # every position once


def evenly_sharded(spec: tuple[Any, ...]) -> bool:
    """Whether Grain reads each record of the loader's shard (its uneven shards lose some)."""
    loader = build_loader(grainfn, spec)
    sampler = loader._sampler
    shards = loader.shard_options.shard_count
    return shard_length(sampler, loader.shard_options) == len(sampler) // shards


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(loader_specs(), st.integers(2, 3), st.integers(0, 6))
def test_random_loaders_come_in_grains_worker_order_and_states_cross(
    spec: tuple[Any, ...], workers: int, taken: int
) -> None:
    note(f"spec = {spec!r}")
    assume(evenly_sharded(spec))
    assume(not any(op[0] == "flat_map" for op in spec[3]))  # Grain runs those as datasets
    theirs = iter(build_loader(grain, spec, workers))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    expected = list(itertools.islice(theirs, LIMIT))
    del theirs  # Grain's DataLoader iterator stops its workers when collected
    ours = iter(build_loader(grainfn, spec, workers, grain_worker_order=True))
    head = list(itertools.islice(ours, taken))
    if len(head) == taken:
        assert json.loads(ours.grain_state(worker_count=workers)) == json.loads(state)
    assert_same_elements(list(itertools.islice(ours, LIMIT)), expected)
    resumed = iter(build_loader(grainfn, spec, workers, grain_worker_order=True))
    resumed.set_state(state)
    assert_same_elements(list(itertools.islice(resumed, LIMIT)), expected)


def filtered_batches(module: Any, workers: int, **options: Any) -> Any:
    """A shuffled shard, a filter and batches: Grain's workers filter and batch their own."""

    class NotThree(module.transforms.Filter):
        def filter(self, x: int) -> bool:
            return x % 3 != 0

    sampler = module.samplers.IndexSampler(
        23, module.sharding.ShardOptions(1, 2), shuffle=True, num_epochs=1, seed=3
    )
    return module.DataLoader(
        data_source=list(range(23)),
        sampler=sampler,
        operations=[NotThree(), module.transforms.Batch(2)],
        worker_count=workers,
        **options,
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("taken", [0, 1, 2, 4])  # 4: the end
def test_a_loader_in_grains_worker_order_crosses_states_both_ways(workers: int, taken: int) -> None:
    theirs = iter(filtered_batches(grain, workers))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    expected = read(theirs)
    del theirs
    ours = iter(filtered_batches(grainfn, workers, grain_worker_order=True))
    list(itertools.islice(ours, taken))
    assert json.loads(ours.grain_state()) == json.loads(state)  # the loader's worker count
    assert read(ours) == expected
    resumed = iter(filtered_batches(grainfn, workers, grain_worker_order=True))
    resumed.set_state(state)
    assert read(resumed) == expected


@pytest.mark.slow
def test_a_loader_state_of_another_worker_count_is_refused_saying_which() -> None:
    theirs = iter(filtered_batches(grain, 3))
    next(theirs)
    state = theirs.get_state()
    del theirs
    ours = iter(filtered_batches(grainfn, 2, grain_worker_order=True))
    with pytest.raises(ValueError, match=r"state is of 3 workers.*worker_count=3"):
        ours.set_state(state)
    with pytest.raises(ValueError, match=r"cannot be written for 3: pass worker_count=2"):
        ours.grain_state(worker_count=3)


# --- The key order of what Grain's workers hand over ------------------------------------


def source(module: Any, data: list[Any]) -> Any:
    return module.MapDataset.source(data).to_iter_dataset()


def shuffled_loader(module: Any, data: list[Any], workers: int, **options: Any) -> Any:
    sampler = module.samplers.IndexSampler(
        len(data), module.sharding.NoSharding(), shuffle=True, num_epochs=1, seed=4
    )
    return module.DataLoader(data_source=data, sampler=sampler, worker_count=workers, **options)


@pytest.mark.slow
@settings(max_examples=3, deadline=None)
@given(templates(), st.integers(1, 3))
def test_workers_hand_over_dicts_in_grains_key_order(template: Any, workers: int) -> None:
    note(f"template = {template!r}")
    data = [element(template, i) for i in range(7)]
    ours = read_to_end(with_workers(grainfn, source(grainfn, data), workers))
    theirs = read_to_end(with_workers(grain, source(grain, data), workers))
    assert_same_trees(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mp_prefetch", "DataLoader"])
def test_workers_hand_over_every_kind_of_node_as_grains(kind: str) -> None:
    data = [every_kind(i) for i in range(5)]
    data += [("text", {"b": 0, "a": 1}), f"s{9}", 9, np.arange(2)]  # elements that are no dict

    def read_all(module: Any, **options: Any) -> list[Any]:
        if kind == "mp_prefetch":
            return read_to_end(with_workers(module, source(module, data), 2))
        return read_to_end(shuffled_loader(module, data, 2, **options))

    ours, theirs = read_all(grainfn, grain_worker_order=True), read_all(grain)
    assert_same_trees(ours, theirs)
    first = next(e for e in ours if isinstance(e, dict))
    assert list(first) == sorted(every_kind(0))
    assert list(first["ordered"]) == ["b", "a"] and list(first["ordered"]["a"]) == ["c", "d"]
    assert list(first["counter"]) == ["b", "a"] and list(first["url"].netloc) == ["a", "b"]


@pytest.mark.parametrize("kind", ["mp_prefetch", "DataLoader"])
def test_grainfns_own_workers_keep_each_elements_key_order(kind: str) -> None:
    data = [{"b": i, "a": {"d": i, "c": i}} for i in range(6)]
    if kind == "mp_prefetch":
        options = grainfn.MultiprocessingOptions(num_workers=2)
        ours = read_to_end(source(grainfn, data).mp_prefetch(options))
        assert ours == data
    else:
        ours = read_to_end(shuffled_loader(grainfn, data, 2))
        assert ours == read_to_end(shuffled_loader(grainfn, data, 0))
    assert all(list(e) == ["b", "a"] and list(e["a"]) == ["d", "c"] for e in ours)
