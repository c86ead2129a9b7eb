"""Grain's get_next_index and set_next_index: a pipeline's position as one integer."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from grainfn import fn
from grainfn._src.core.filter_check import WithOptionsStream
from grainfn._src.core.random_stage import random_stages
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.grain_states.next_index import at_next_index, next_index
from grainfn._src.testing.specs import INTEGERS, apply_op

from support.registry import leaf_kinds, names, simplest_op


def advanced(stream: Any, count: int) -> Any:
    """The state of `stream` after `count` elements."""
    iterator = fn.iterate(stream)
    for _ in itertools.islice(iterator, count):
        pass
    return iterator.state


def data() -> Any:
    """Ten integers, seeded for the random stages."""
    return fn.seed(1, fn.range(10))


@functools.cache
def ray_pool() -> fn.RayPool:
    """One pool for the test's Ray stage (it starts Ray only when read, which it is not)."""
    return fn.RayPool(2)


def on_device(dataset: Any) -> Any:
    import jax

    return fn.put_on_device(jax.devices()[0], fn.from_dataset(dataset))


UNDECLARED: dict[str, Callable[[Any], Any]] = {
    "FromDatasetStream": fn.from_dataset,
    "InterleavedDatasetsStream": lambda dataset: fn.interleave(1, fn.source([dataset])),
    "GrainWorkerOrderStream": lambda dataset: fn.grain_worker_order(1, fn.from_dataset(dataset)),
    "CachedStream": lambda dataset: fn.cache(fn.from_dataset(dataset)),
    "PrefetchedStream": lambda dataset: fn.mp_prefetch(2, fn.from_dataset(dataset)),
    "RayPrefetchedStream": lambda dataset: fn.ray_prefetch(ray_pool(), fn.from_dataset(dataset)),
    "ThreadPrefetchedStream": lambda dataset: fn.thread_prefetch(2, fn.from_dataset(dataset)),
    "TimedStream": lambda dataset: fn.timed(fn.from_dataset(dataset)),
    "PutOnDeviceStream": on_device,
    "WithOptionsStream": lambda dataset: WithOptionsStream(fn.from_dataset(dataset), ()),
}
"""How each stage that the index crosses and that declares no `random_stage` is built over data."""

NOT_READ: dict[str, str] = {
    "RayPrefetchedStream": "reading it starts a Ray cluster",
    "PutOnDeviceStream": "reading it imports jax",
}
"""The stages whose index is checked from their states alone, each with why."""


def crossed() -> list[type]:
    """Every leaf stream stage the index crosses: by its declared rule, or as a transparent one."""
    kinds = leaf_kinds("stream")
    return [kind for kind in kinds if kind.next_index_rule is not None or kind.transparent]


def yields_five(op: tuple[Any, ...]) -> bool:
    stream = apply_op(op, fn.from_dataset(data()))
    return len(list(itertools.islice(fn.iterate(stream), 5))) == 5


def built(name: str) -> Any:
    """The stage of class `name` over `data()`: its simplest declared spec yielding 5 elements."""
    kind = next(kind for kind in [*crossed(), FromDatasetStream] if kind.__qualname__ == name)
    stages = random_stages(kind)
    if stages:
        return apply_op(simplest_op(stages[0], INTEGERS, yields_five), fn.from_dataset(data()))
    return UNDECLARED[name](data())


def test_every_stage_the_index_crosses_is_built_here() -> None:
    undeclared = {kind.__qualname__ for kind in crossed() if not random_stages(kind)}
    missing = undeclared - set(UNDECLARED)
    assert not missing, f"stages the index crosses that no test here builds: {sorted(missing)}"
    for name in [*names(set(crossed())), "FromDatasetStream"]:
        assert type(built(name)).__qualname__ == name


READ = sorted({*names(set(crossed())), "FromDatasetStream"} - set(NOT_READ))


@pytest.mark.parametrize("name", READ)
def test_stages_count_what_they_yield_by_their_rule(name: str) -> None:
    stream = built(name)
    for count in (0, 1, 4):
        state = advanced(stream, count)
        assert next_index(stream, state) == count
        moved = at_next_index(stream, stream.init(), count)
        assert next_index(stream, moved) == count
        assert list(itertools.islice(fn.iterate(stream, moved), 2)) == list(
            itertools.islice(fn.iterate(stream, state), 2)
        )


@pytest.mark.parametrize(
    "name", sorted(kind.__qualname__ for kind in crossed() if kind.transparent)
)
def test_a_transparent_stage_passes_the_index_on_to_its_parent(name: str) -> None:
    stream = built(name)
    (parent,) = stream.parents
    moved = at_next_index(stream, stream.init(), 3)
    assert moved == at_next_index(parent, parent.init(), 3)
    assert next_index(stream, moved) == next_index(parent, moved) == 3


def test_a_batch_counts_batches_rounding_a_partial_one_up() -> None:
    stream = fn.batch(3, fn.from_dataset(fn.range(10)))
    assert next_index(stream, advanced(stream, 2)) == 2
    assert next_index(stream, fn.DatasetPosition(4)) == 2  # inside the second batch
    state = at_next_index(stream, stream.init(), 3)
    assert state == fn.DatasetPosition(9)
    assert [b.tolist() for b in fn.iterate(stream, state)] == [[9]]


def test_a_counter_keeps_the_index_as_its_count() -> None:
    stream = fn.limit(5, fn.from_dataset(fn.range(10)))
    state = at_next_index(stream, stream.init(), 3)
    assert state.taken == 3 and state.parent == fn.DatasetPosition(3)
    assert list(fn.iterate(stream, state)) == [3, 4]


def test_an_index_past_the_end_of_the_dataset_read_is_refused() -> None:
    stream = fn.from_dataset(fn.range(10))
    assert at_next_index(stream, stream.init(), 10) == fn.DatasetPosition(10)  # the end
    with pytest.raises(IndexError, match="index 11 is past the end of the dataset read, of length"):
        at_next_index(stream, stream.init(), 11)


def test_stages_without_one_index_are_refused_by_name() -> None:
    filtered = fn.filter(lambda x: x % 2, fn.from_dataset(fn.range(10)))
    with pytest.raises(NotImplementedError, match="position of the stage 'filter"):
        next_index(filtered, filtered.init())
    with pytest.raises(NotImplementedError, match="use get_state and set_state"):
        at_next_index(filtered, filtered.init(), 2)
    two = fn.interleave(2, fn.source([fn.range(3), fn.range(4)]))
    with pytest.raises(NotImplementedError, match="get_next_index is not supported for an Interl"):
        next_index(two, two.init())
    with pytest.raises(NotImplementedError, match=r"set_next_index is not supported .* 2 datasets"):
        at_next_index(two, two.init(), 1)
