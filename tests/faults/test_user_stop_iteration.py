"""A StopIteration raised by a user function is an error, never a silent end of the data.

Inside a pipeline, a StopIteration that escaped a user function would read as
the end of the data (and Grain ends there, silently). grainfn raises
`UserStopIterationError` instead, naming the stage and the position, chained
from the StopIteration, on every path that reads a pipeline: in the parent, in
threads, in worker processes, in logical shards, on the way to a device. As
for any other user error, nothing is skipped: the iterator stays after the
last element it returned, and the next `next()` raises again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.testing.specs import (
    Functions,
    Level,
    declared_stages,
)

from support.leaks import assert_nothing_left
from support.registry import (
    FIXED_FUNCTIONS,
    LEVELS,
    names,
    simplest_stage,
    undeclared,
    user_function_kinds,
    user_function_stages,
)
from support.waiting import no_hang

N = 20
AT = 5
BEFORE = list(range(AT))
# adaptive=False: every read in the workers, where these tests raise the error.
ONE_WORKER = grain.MultiprocessingOptions(num_workers=1, adaptive=False)
TWO_WORKERS = grain.MultiprocessingOptions(num_workers=2, adaptive=False)


def stop_at_5(x: Any) -> Any:
    """`x`, except at 5: a StopIteration, as `next()` on an exhausted iterator raises."""
    if int(x) == AT:
        raise StopIteration(f"nothing left for {x}")
    return x


def keep_until_5(x: Any) -> bool:
    """A predicate: True, except at 5: a StopIteration."""
    return stop_at_5(x) is not None


class StopMap(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        return stop_at_5(element)


class StopRandomMap(grain.transforms.RandomMap):
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return stop_at_5(element)


class StopFilter(grain.transforms.Filter):
    def filter(self, element: Any) -> bool:
        return keep_until_5(element)


class StopFlatMap(grain.experimental.FlatMapTransform):
    max_fan_out = 1

    def flat_map(self, element: Any) -> list[Any]:
        return [stop_at_5(element)]


class StopMapWithIndex(grain.experimental.MapWithIndexTransform):
    def map_with_index(self, index: int, element: Any) -> Any:
        return stop_at_5(element)


class StopSource:
    """A data source whose `[]` raises StopIteration at record 5."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> int:
        return stop_at_5(index)


class StopMapDataset(grain.MapDataset):
    """A user's MapDataset whose `[]` raises StopIteration at position 5."""

    def __init__(self) -> None:
        super().__init__([])

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: Any) -> Any:
        return stop_at_5(index)


class StopSelection(grain.transforms.DatasetSelectionMap):
    """Position i reads index i of dataset 0; a StopIteration at position 5."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> tuple[int, int]:
        return 0, stop_at_5(index)


RANGE = grain.MapDataset.range(N)


def loader(operations: list[Any], workers: int = 0, source: Any = None) -> Any:
    return grain.DataLoader(
        data_source=list(range(N)) if source is None else source,
        sampler=grain.SequentialSampler(N),
        operations=operations,
        worker_count=workers,
        adaptive=False,  # with workers, every read in them
    )


def elastic(shards: int) -> Any:
    ds = RANGE.map(stop_at_5).to_iter_dataset()
    return grain.experimental.ElasticIterator(
        ds, shards, grain.ShardOptions(0, 1), num_logical_shards=shards
    )


AT_POSITION = r"reading position 5\b"
AT_STREAM_ELEMENT = r"reading the stream element that ends at state DatasetPosition\(position=6\)"
MAPPED = RANGE.map(stop_at_5).to_iter_dataset()
ITER_MAPPED = RANGE.to_iter_dataset().map(stop_at_5)

PATHS: dict[str, tuple[Callable[[], Any], list[Any], str, str]] = {
    # name: (the iterable, the elements before the error, the stage the message names,
    # where it says it was reading)
    "MapDataset": (lambda: RANGE.map(stop_at_5), BEFORE, "map(stop_at_5)", AT_POSITION),
    "to_iter_dataset": (lambda: MAPPED, BEFORE, "map(stop_at_5)", AT_POSITION),
    "iter-level map": (
        lambda: RANGE.to_iter_dataset().map(stop_at_5),
        BEFORE,
        "map(stop_at_5)",
        AT_STREAM_ELEMENT,
    ),
    "iter-level filter": (
        lambda: RANGE.to_iter_dataset().filter(keep_until_5),
        BEFORE,
        "filter(keep_until_5)",
        AT_STREAM_ELEMENT,
    ),
    "mp_prefetch": (
        lambda: MAPPED.mp_prefetch(TWO_WORKERS),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "fn.iterate": (
        lambda: fn.iterate(fn.map(stop_at_5, fn.range(N))),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "DataLoader, 0 workers": (lambda: loader([StopMap()]), BEFORE, "StopMap.map", AT_POSITION),
    "DataLoader, 1 worker": (
        lambda: loader([StopMap()], workers=1),
        BEFORE,
        "StopMap.map",
        AT_POSITION,
    ),
    "ThreadPrefetch": (
        lambda: grain.experimental.ThreadPrefetchIterDataset(MAPPED, prefetch_buffer_size=4),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "ReadOptions threads": (
        lambda: RANGE.map(stop_at_5).to_iter_dataset(grain.ReadOptions(num_threads=4)),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "cache": (
        lambda: grain.experimental.CacheIterDataset(MAPPED),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "ElasticIterator": (lambda: elastic(1), BEFORE, "map(stop_at_5)", AT_POSITION),
    "ElasticIterator, 2 logical shards": (
        lambda: elastic(2),
        [[0, 1], [2, 3]],
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "multithread_prefetch": (
        lambda: grain.experimental.multithread_prefetch(MAPPED, num_threads=2, buffer_size=4),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "device_put": (
        lambda: grain.experimental.device_put(MAPPED, jax.devices()[0]),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "repeat": (lambda: RANGE.map(stop_at_5).repeat(), BEFORE, "map(stop_at_5)", AT_POSITION),
    # The iter-level map's cursor, which a failure leaves spoilt, under the same executors:
    "ThreadPrefetch, iter-level map": (
        lambda: grain.experimental.ThreadPrefetchIterDataset(ITER_MAPPED, prefetch_buffer_size=4),
        BEFORE,
        "map(stop_at_5)",
        AT_STREAM_ELEMENT,
    ),
    "multithread_prefetch, iter-level map": (
        lambda: grain.experimental.multithread_prefetch(ITER_MAPPED, num_threads=2, buffer_size=4),
        BEFORE,
        "map(stop_at_5)",
        r"reading the stream element that ends at state DatasetPosition\(position=3\)",
    ),
    "device_put, iter-level map": (
        lambda: grain.experimental.device_put(ITER_MAPPED, jax.devices()[0]),
        BEFORE,
        "map(stop_at_5)",
        AT_STREAM_ELEMENT,
    ),
    "iter-level repeat and cache": (
        lambda: grain.experimental.RepeatIterDataset(
            grain.experimental.CacheIterDataset(ITER_MAPPED)
        ),
        BEFORE,
        "map(stop_at_5)",
        AT_STREAM_ELEMENT,
    ),
}


def state_of(it: Any) -> Any:
    """The iterator's state: `get_state()` of the Grain API, `.state` of `fn.iterate`."""
    return it.state if isinstance(it, fn.StreamIterator) else it.get_state()


def numbers(element: Any) -> list[int]:
    """The numbers an element holds (a number, a device array, a batch)."""
    return np.ravel(np.asarray(element)).tolist()


def assert_stops_with_the_error(
    it: Iterator[Any], before: list[Any], stage: str, where: str
) -> None:
    """Reads `before`, then the error twice at the same place, naming `stage` and `where`."""
    delivered = [next(it) for _ in before]
    assert [numbers(e) for e in delivered] == [numbers(e) for e in before]
    state = state_of(it)
    for _ in range(2):  # a deterministic fault: raised again, nothing skipped, no end
        with pytest.raises(grain.UserStopIterationError) as caught:
            next(it)
        message = str(caught.value)
        assert message.startswith(("The function of ", "The data source ")), message
        assert stage in message.split(" raised StopIteration, ")[0], message
        assert caught.match(where)
        assert isinstance(caught.value, RuntimeError)
        assert isinstance(caught.value.__cause__, StopIteration)
        assert str(caught.value.__cause__) == "nothing left for 5"
        assert state_of(it) == state


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
def test_a_user_stop_iteration_is_an_error_on_every_path(path: str) -> None:
    make, before, stage, where = PATHS[path]
    it = iter(make())
    try:
        with no_hang(f"reading {path} to its error"):
            assert_stops_with_the_error(it, before, stage, where)
    finally:
        if hasattr(it, "close"):
            it.close()
    assert_nothing_left()


def sum_until_5(values: list[Any]) -> Any:
    """A batch_fn: the sum of a batch; a StopIteration for the batch that holds 5."""
    if AT in values:
        raise StopIteration(f"nothing left for {AT}")
    return sum(values)


STREAM = RANGE.to_iter_dataset()
KINDS: dict[str, tuple[Callable[[], Any], list[Any], str, str]] = {
    # name: (the pipeline, the elements before the error, its stage, where it was reading)
    "map": (lambda: RANGE.map(stop_at_5), BEFORE, "map(stop_at_5)", AT_POSITION),
    "random_map": (
        lambda: RANGE.random_map(lambda x, rng: stop_at_5(x), seed=1),
        BEFORE,
        "random_map(",
        AT_POSITION,
    ),
    "map_with_index": (
        lambda: RANGE.map_with_index(lambda i, x: stop_at_5(x)),
        BEFORE,
        "map_with_index(",
        AT_POSITION,
    ),
    "filter": (
        lambda: RANGE.filter(keep_until_5).to_iter_dataset(),
        BEFORE,
        "filter(keep_until_5)",
        AT_POSITION,
    ),
    "flat_map": (
        lambda: grain.experimental.FlatMapMapDataset(RANGE, StopFlatMap()).to_iter_dataset(),
        BEFORE,
        "flat_map(",
        r"reading parent position 5\b",
    ),
    "a map before a batch": (
        lambda: RANGE.map(stop_at_5).batch(1),
        BEFORE,
        "map(stop_at_5)",
        AT_POSITION,
    ),
    "batch_fn": (
        lambda: RANGE.batch(2, batch_fn=sum_until_5),
        [1, 5],
        "batch(2, batch_fn=sum_until_5)",
        r"reading position 2\b",
    ),
    "Map": (lambda: RANGE.map(StopMap()), BEFORE, "StopMap.map", AT_POSITION),
    "RandomMap": (
        lambda: RANGE.seed(3).random_map(StopRandomMap()),
        BEFORE,
        "StopRandomMap.random_map",
        AT_POSITION,
    ),
    "MapWithIndex": (
        lambda: RANGE.map_with_index(StopMapWithIndex()),
        BEFORE,
        "StopMapWithIndex.map_with_index",
        AT_POSITION,
    ),
    "Filter": (
        lambda: RANGE.filter(StopFilter()).to_iter_dataset(),
        BEFORE,
        "StopFilter.filter",
        AT_POSITION,
    ),
    "FlatMap": (
        lambda: RANGE.to_iter_dataset().apply(StopFlatMap()),
        BEFORE,
        "StopFlatMap.flat_map",
        AT_STREAM_ELEMENT,
    ),
    "iter-level random_map": (
        lambda: STREAM.seed(3).random_map(StopRandomMap()),
        BEFORE,
        "StopRandomMap.random_map",
        r"reading element 5 of its stream",
    ),
    "iter-level map_with_index": (
        lambda: STREAM.map_with_index(lambda i, x: stop_at_5(x)),
        BEFORE,
        "map_with_index(",
        r"reading element 5 of its stream",
    ),
    "iter-level flat_map": (
        lambda: grain.experimental.FlatMapIterDataset(STREAM, StopFlatMap()),
        BEFORE,
        "flat_map(",
        AT_STREAM_ELEMENT,
    ),
    "iter-level batch_fn": (
        lambda: STREAM.batch(2, batch_fn=sum_until_5),
        [1, 5],
        "batch(2, batch_fn=sum_until_5)",
        r"reading the batch of 2 elements that ends at state DatasetPosition\(position=6\)",
    ),
    "a map before an iter-level batch": (
        lambda: RANGE.to_iter_dataset().map(stop_at_5).batch(2),
        [[0, 1], [2, 3]],
        "map(stop_at_5)",
        r"reading one of the 2 stream elements up to state DatasetPosition\(position=6\)",
    ),
    "a map before an iter-level batch of 1": (
        lambda: RANGE.to_iter_dataset().map(stop_at_5).batch(1),
        BEFORE,
        "map(stop_at_5)",
        AT_STREAM_ELEMENT,
    ),
    "a data source": (
        lambda: grain.MapDataset.source(StopSource()),
        BEFORE,
        "source(StopSource, length 20)",
        AT_POSITION,
    ),
    "a selection map": (
        lambda: grain.MapDataset.select_from_datasets([RANGE], StopSelection()),
        BEFORE,
        "select_from_datasets(StopSelection)",
        AT_POSITION,
    ),
    "a user's MapDataset": (
        lambda: StopMapDataset().to_iter_dataset(),
        BEFORE,
        "The function of StopMapDataset",
        AT_POSITION,
    ),
    "a DataLoader data source": (
        lambda: loader([], source=StopSource()),
        BEFORE,
        "source(StopSource, length 20)",
        AT_POSITION,
    ),
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_user_function_raises_it(kind: str) -> None:
    make, before, stage, where = KINDS[kind]
    it = iter(make())
    assert_stops_with_the_error(it, before, stage, where)


def stop_at_5_drawing(x: Any, rng: np.random.Generator) -> Any:
    """A random map: `x` and a draw, except at 5: a StopIteration."""
    rng.integers(10)
    return stop_at_5(x)


STOPPING = Functions(
    maps={"stop_at_5": stop_at_5},
    random_maps={"stop_at_5_drawing": stop_at_5_drawing},
    filters={"keep_until_5": keep_until_5},
    with_index=False,
)
"""The element functions of drawn stages: each raises StopIteration at 5."""

DRAWN = user_function_stages(STOPPING)
"""The declared stages that take a user's function, by level and name, drawn with STOPPING."""


COVERED: dict[str, str] = {
    "FlatMappedDataset": "flat_map",
    "FlatMappedStream": "iter-level flat_map",
    "SourceDataset": "a data source",
    "SelectedDataset": "a selection map",
    "ObjectDataset": "a user's MapDataset",
    "SampledDataset": "a DataLoader data source",
}
"""The stage kinds without a declaration, or declared as heads (which are not drawn over a
stage's data), that call a user's function: the KINDS entry of each."""

NO_USER_FUNCTION: dict[str, str] = {
    "ZippedDataset": "it reads its parents in step",
    "MixedDataset": "it reads its parents in turn",
    "ConcatenatedDataset": "it reads its parents one after another",
    "MixedStream": "it reads its parents in turn",
    "RangeDataset": "it computes its integers",
    "InNamedThreads": "an executor: it reads its parent (PATHS 'ReadOptions threads')",
    "HostRows": "the elastic iterator's rows: it reads its parent (PATHS 'ElasticIterator')",
    "CachedStream": "it keeps its parent's elements (PATHS 'cache')",
    "ElasticStream": "it reads its shards (PATHS 'ElasticIterator')",
    "PrefetchedStream": "an executor (PATHS 'mp_prefetch')",
    "ThreadPrefetchedStream": "an executor (PATHS 'ThreadPrefetch')",
    "WithOptionsStream": "an executor: reading options",
    "PooledLeaf": "a worker's leaf of mp_prefetch (PATHS 'mp_prefetch')",
    "RayPrefetchedStream": "an executor whose workers are ray's",
    "FromDatasetStream": "it reads its dataset (every PATHS entry of a to_iter_dataset)",
    "GrainWorkerOrderStream": "it reads its workers' streams in Grain's order",
    "IterableStream": "a user's iterator, whose StopIteration is its end, as in Grain",
    "InterleavedDatasetsStream": "it reads its datasets' streams",
    "ZippedStream": "it reads its parents in step",
    "RebatchedStream": "it regroups its parent's batches",
    "WindowShuffledStream": "it shuffles its parent's elements",
    "PackedStream": "it packs by the lengths of its parent's arrays",
    "PackAndBatchStream": "it packs by the lengths of its parent's arrays",
    "ConcatThenSplitStream": "it packs by the lengths of its parent's arrays",
    "CompiledStage": "a device stage computed on the host: its functions are traced by jax",
    "TimedDataset": "fn.timed: it times its parent",
    "TimedStream": "fn.timed: it times its parent",
    "PutOnDeviceStream": "an executor (PATHS 'device_put')",
    "ParquetFileStream": "it reads parquet files",
    "TFRecordStream": "it reads TFRecord files",
}
"""The stage kinds without a declaration, or declared as heads, that call no function of a
user's, and what they do."""


IN_A_STREAM = rf"{AT_STREAM_ELEMENT}|reading element 5 of its stream"


@pytest.mark.parametrize(("level", "name"), sorted(DRAWN))
def test_every_declared_stage_that_calls_a_user_function_raises_it(level: Level, name: str) -> None:
    it = fn.iterate(simplest_stage(level, DRAWN[level, name], STOPPING, fn.seed(1, fn.range(N))))
    where = AT_POSITION if level == "dataset" else IN_A_STREAM
    assert_stops_with_the_error(it, BEFORE, f"{DRAWN[level, name].function}(", where)


def test_every_stage_kind_that_calls_a_user_function_is_drawn_or_in_kinds() -> None:
    assert user_function_kinds() - set(DRAWN) == set(FIXED_FUNCTIONS), "declared, so drawn"
    assert all(name in KINDS for level, name in FIXED_FUNCTIONS if name != "random_map_jax")
    heads = {kind for level in LEVELS for kind, stage in declared_stages(level) if stage.combines}
    kinds = set(names(undeclared("dataset") | undeclared("stream") | heads))
    missing = sorted(kinds - set(COVERED) - set(NO_USER_FUNCTION))
    assert not missing, f"{missing}: declare random_stage, or add to COVERED or NO_USER_FUNCTION"
    assert set(COVERED) | set(NO_USER_FUNCTION) <= kinds, "declared, so drawn, or no stage kind"
    assert set(COVERED.values()) <= set(KINDS)


def test_a_source_that_runs_out_is_told_how_to_say_so() -> None:
    with pytest.raises(grain.UserStopIterationError) as raised:
        list(grain.MapDataset.source(StopSource()))
    message = str(raised.value)
    assert "raised StopIteration at source[5], reading position 5" in message
    assert "make len() count only the records it has, or raise IndexError" in message
    assert "docs/migrating-from-grain.md" in message


def test_fn_step_raises_it_instead_of_returning_the_end() -> None:
    stream = fn.map(stop_at_5, fn.from_dataset(fn.range(N)))
    state = fn.DatasetPosition(AT)
    for _ in range(2):  # step is pure: the same state fails the same way
        with pytest.raises(grain.UserStopIterationError, match=r"map\(stop_at_5\)"):
            stream.step(state)
    assert fn.map(stop_at_5, fn.range(N)).get_many([3, 4]) == [3, 4]
    with pytest.raises(grain.UserStopIterationError, match=AT_POSITION):
        fn.map(stop_at_5, fn.range(N)).get_many([4, 5, 6])


def test_a_cache_does_not_keep_a_user_stop_iteration_as_the_end() -> None:
    ds = grain.experimental.CacheIterDataset(RANGE.map(stop_at_5).to_iter_dataset())
    for _ in range(2):  # a second iterator shares the cache: the error, again, not an end
        it = iter(ds)
        assert_stops_with_the_error(it, BEFORE, "map(stop_at_5)", AT_POSITION)


WORKERS: dict[str, tuple[Callable[[], Any], list[list[int]]]] = {
    # name: (the pipeline, the elements before the error, each as a list of numbers)
    "mp_prefetch": (
        lambda: RANGE.map(stop_at_5).to_iter_dataset().mp_prefetch(ONE_WORKER),
        [[x] for x in BEFORE],
    ),
    "mp_prefetch, batched in the parent": (
        lambda: RANGE.map(stop_at_5).to_iter_dataset().mp_prefetch(TWO_WORKERS).batch(2),
        [[0, 1], [2, 3]],
    ),
    "DataLoader": (lambda: loader([StopMap()], workers=1), [[x] for x in BEFORE]),
    "DataLoader, batched": (
        lambda: loader([StopMap(), grain.transforms.Batch(2)], workers=1),
        [[0, 1], [2, 3]],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", WORKERS)
def test_with_workers_it_arrives_as_the_error_not_as_an_end(case: str) -> None:
    make, expected = WORKERS[case]
    it = iter(make())
    elements: list[list[int]] = []
    errors: list[BaseException] = []
    states = []
    with no_hang("reading through the workers' errors"):
        while len(errors) < 3:
            try:
                element = next(it)
            except StopIteration:  # what grainfn did before: the end, 15 elements missing
                break
            except grain.UserStopIterationError as error:
                errors.append(error.with_traceback(None))
                states.append(it.get_state())
                continue
            elements.append(np.ravel(element).tolist())
            after_last = it.get_state()
    assert elements == expected
    assert len(errors) == 3, "the data ended instead of raising"
    assert states == [after_last] * 3
    for error in errors:
        assert "The function of map(" in str(error) and "reading position 5" in str(error)
        assert any(note.startswith("Raised in grainfn worker") for note in error.__notes__)
        assert isinstance(error.__cause__, StopIteration)  # it travels from the worker too
    it.close()
    del it, errors
    assert_nothing_left()


class StopSampler:
    """Grain's Sampler protocol, written by a user: `[5]` raises StopIteration."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> grain.RecordMetadata:
        return grain.RecordMetadata(index=index, record_key=stop_at_5(index))


def test_a_user_samplers_stop_iteration_is_an_error_in_a_data_loader() -> None:
    loader = grain.DataLoader(
        data_source=list(range(N)), sampler=StopSampler(), shard_options=grain.NoSharding()
    )
    it = iter(loader)
    assert_stops_with_the_error(it, list(range(5)), "sample(", "position 5")
