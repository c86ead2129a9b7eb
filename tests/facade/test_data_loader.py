"""Grain's `data_loader` module's facade: DataLoader, its own guarantees beyond matching Grain.

`load` is tested in test_load.py; the samplers, shard options and records it reads
in tests/loader/.
"""

from __future__ import annotations

import collections
import itertools
import json
import multiprocessing
import os
import signal
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
import grainfn.python
from grainfn._src.parallel.processes import WorkerError

from support.leaks import assert_nothing_left
from support.loader_specs import OFFSET, assert_same_elements, build_loader, loader_specs
from support.waiting import no_hang


def read(iterator: Any, limit: int | None = None) -> list[Any]:
    return list(itertools.islice(iterator, limit))


def assert_equal_lists(ours: list[Any], expected: list[Any]) -> None:
    assert_same_elements(ours, expected)


class Scale(grain.transforms.Map):
    def map(self, x: Any) -> Any:
        return {"value": x, "double": np.array([2 * x, 2 * x + 1], dtype=np.int32)}


class Jitter(grain.transforms.RandomMap):
    def random_map(self, x: Any, rng: np.random.Generator) -> Any:
        return {**x, "noise": rng.random()}


class NotMultipleOfFive(grain.transforms.Filter):
    def filter(self, x: Any) -> bool:
        return x["value"] % 5 != 0


class Halves(grain.experimental.FlatMapTransform):
    max_fan_out = 2

    def flat_map(self, x: Any) -> list[Any]:
        return [x["double"][:1], x["double"][1:]]


def full_loader(worker_count: int, num_records: int = 60, seed: int = 7) -> grain.DataLoader:
    """Shuffle, two epochs, random_map, filter, batch, flat_map: every kind of stage."""
    return grain.DataLoader(
        data_source=[OFFSET + k for k in range(num_records)],
        sampler=grain.samplers.IndexSampler(num_records, shuffle=True, num_epochs=2, seed=seed),
        operations=[Scale(), Jitter(), NotMultipleOfFive(), grain.transforms.Batch(4), Halves()],
        worker_count=worker_count,
        shard_options=grain.sharding.NoSharding(),
    )


# --- Records: every record once per epoch, over all shards -------------------


@settings(max_examples=60)
@given(
    num_records=st.integers(1, 40),
    shard_count=st.integers(1, 4),
    num_epochs=st.integers(1, 3),
    shuffle=st.booleans(),
    interleaved=st.booleans(),
)
def test_shards_read_every_record_once_per_epoch(
    num_records: int, shard_count: int, num_epochs: int, shuffle: bool, interleaved: bool
) -> None:
    if num_records < shard_count:
        num_records = shard_count
    counts: collections.Counter[int] = collections.Counter()
    for index in range(shard_count):
        shard = grain.sharding.ShardOptions(index, shard_count)
        sampler = grain.samplers.IndexSampler(
            num_records,
            shard_options=grain.sharding.NoSharding() if interleaved else shard,
            shuffle=shuffle,
            num_epochs=num_epochs,
            seed=5,
        )
        loader = grain.DataLoader(
            data_source=range(num_records), sampler=sampler, shard_options=shard
        )
        counts.update(loader)
    assert counts == collections.Counter({k: num_epochs for k in range(num_records)})


def test_drop_remainder_gives_equal_shards() -> None:
    lengths = []
    for index in range(3):
        shard = grain.ShardOptions(index, 3, drop_remainder=True)
        sampler = grain.IndexSampler(10, shard_options=shard, num_epochs=2)
        lengths.append(len(list(grain.DataLoader(data_source=range(10), sampler=sampler))))
    assert lengths == [6, 6, 6]


def test_map_with_index_sees_the_sampler_index() -> None:
    class Pair(grain.transforms.MapWithIndex):
        def map_with_index(self, index: int, x: int) -> tuple[int, int]:
            return index, x

    shard = grain.ShardOptions(1, 2)
    sampler = grain.IndexSampler(6, shard_options=shard, shuffle=True, num_epochs=1, seed=3)
    pairs = list(grain.DataLoader(data_source=range(6), sampler=sampler, operations=[Pair()]))
    assert [index for index, _ in pairs] == [1, 3, 5]
    assert [x for _, x in pairs] == [sampler[g].record_key for g in (1, 3, 5)]


def test_random_map_draws_from_the_samplers_generator() -> None:
    class Draw(grain.transforms.RandomMap):
        def random_map(self, x: int, rng: np.random.Generator) -> int:
            return int(rng.integers(1 << 30))

    sampler = grain.SequentialSampler(4, seed=9)
    draws = list(grain.DataLoader(data_source=range(4), sampler=sampler, operations=[Draw()]))
    expected = [
        int(np.random.Generator(np.random.Philox(key=9 + g)).integers(1 << 30)) for g in range(4)
    ]
    assert draws == expected


def test_legacy_operations_equal_the_transformations() -> None:
    def loader(operations: list[Any]) -> list[Any]:
        sampler = grain.IndexSampler(20, shuffle=True, num_epochs=1, seed=2)
        return list(grain.DataLoader(data_source=range(20), sampler=sampler, operations=operations))

    class Add(grain.transforms.Map):
        def map(self, x: int) -> int:
            return x + 100

    class Noise(grain.transforms.RandomMap):
        def random_map(self, x: int, rng: np.random.Generator) -> float:
            return x + rng.random()

    class Odd(grain.transforms.Filter):
        def filter(self, x: float) -> bool:
            return int(x) % 2 == 1

    legacy = loader(
        [
            grainfn.python.MapOperation(lambda x: x + 100),
            grainfn.python.RandomMapOperation(lambda x, rng: x + rng.random()),
            grainfn.python.FilterOperation(lambda x: int(x) % 2 == 1),
            grainfn.python.BatchOperation(3),
        ]
    )
    modern = loader([Add(), Noise(), Odd(), grain.Batch(3)])
    assert_equal_lists(legacy, modern)


def test_operations_may_be_any_iterable_or_a_single_transformation() -> None:
    def loader(operations: Any) -> list[Any]:
        sampler = grain.SequentialSampler(5)
        return list(grain.DataLoader(data_source=range(5), sampler=sampler, operations=operations))

    batch = grain.transforms.Batch(2)
    expected = [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in loader(op for op in [batch])] == expected
    assert [b.tolist() for b in loader(batch)] == expected
    with pytest.raises(TypeError, match="DataLoader operations must be Map"):
        loader("batch")


# --- Worker processes: the output and the states do not depend on their number -


def test_worker_count_changes_nothing() -> None:
    expected = read(full_loader(0))
    assert len(expected) > 40
    for workers in (1, 2, 3):
        assert_equal_lists(read(full_loader(workers)), expected)


def test_state_resumes_with_any_worker_count() -> None:
    expected = read(full_loader(0))
    for saved_with, restored_with, cut in [(2, 0, 7), (0, 3, 20), (1, 2, 33)]:
        with iter(full_loader(saved_with)) as it:
            head = read(it, cut)
            state = it.get_state()
        assert isinstance(state, bytes)
        assert json.loads(state)["worker_count"] == saved_with
        with iter(full_loader(restored_with)) as resumed:
            resumed.set_state(state)
            tail = read(resumed)
        assert_equal_lists(head + tail, expected)


@given(spec=loader_specs(max_records=20), cut=st.integers(0, 30))
def test_resume_anywhere(spec: tuple[Any, ...], cut: int) -> None:
    expected = read(build_loader(grain, spec), 60)
    it = iter(build_loader(grain, spec))
    head = read(it, min(cut, len(expected)))
    resumed = iter(build_loader(grain, spec))
    resumed.set_state(it.get_state())
    assert_equal_lists(head + read(resumed, len(expected) - len(head)), expected)


def test_a_failing_operation_in_a_worker_is_raised_here() -> None:
    class Explode(grain.transforms.Map):
        def map(self, x: int) -> int:
            if x == 13:
                raise KeyError(f"bad record {x}")
            return x

    loader = grain.DataLoader(
        data_source=range(30),
        sampler=grain.SequentialSampler(30),
        operations=[Explode()],
        worker_count=2,
    )
    with iter(loader) as it:
        assert read(it, 13) == list(range(13))
        with pytest.raises(KeyError, match="bad record 13"):
            next(it)


class Slow(grain.transforms.Map):
    def map(self, x: int) -> int:
        time.sleep(0.001)
        return x


def test_a_killed_worker_is_an_error_and_nothing_is_left_behind() -> None:
    loader = grain.DataLoader(
        data_source=range(5_000),
        sampler=grain.SequentialSampler(5_000),
        operations=[Slow(), grain.transforms.Batch(10)],
        worker_count=2,
        adaptive=False,  # every read in the workers, from the first
    )
    it = iter(loader)
    next(it)
    (victim, *_) = [
        p for p in multiprocessing.active_children() if p.name.startswith("grainfn-worker")
    ]
    os.kill(victim.pid, signal.SIGKILL)
    with no_hang("the error of a killed worker"), pytest.raises(WorkerError, match="signal 9"):
        read(it)
    it.close()
    assert_nothing_left()


# --- States of other loaders are refused, saying what differs -----------------


def state_after(loader: grain.DataLoader, steps: int = 3) -> bytes:
    it = iter(loader)
    read(it, steps)
    return it.get_state()


def make(source: Any = None, seed: int = 1, operations: Any = ()) -> grain.DataLoader:
    return grain.DataLoader(
        data_source=source if source is not None else list(range(10)),
        sampler=grain.IndexSampler(10, shuffle=True, num_epochs=1, seed=seed),
        operations=list(operations),
    )


def test_state_of_another_sampler_is_refused() -> None:
    with pytest.raises(ValueError, match=r"another DataLoader: its sampler is .*seed=1.*seed=2"):
        iter(make(seed=2)).set_state(state_after(make(seed=1)))


def test_state_of_another_source_is_refused() -> None:
    with pytest.raises(
        ValueError, match="another DataLoader: its data_source is \"<class 'list'>\""
    ):
        iter(make(source=grain.sources.RangeDataSource(0, 10, 1))).set_state(state_after(make()))


def test_state_of_other_operations_is_refused() -> None:
    class Plus(grain.transforms.Map):
        def map(self, x: int) -> int:
            return x + 1

    with pytest.raises(
        ValueError, match=r"another pipeline: stage line 2 .* but .map\(Map .*Plus.map\)"
    ):
        iter(make(operations=[Plus()])).set_state(state_after(make()))


def test_grain_state_and_garbage_are_refused() -> None:
    truncated_grain_state = json.dumps({"version": 2, "last_seen_indices": {"0": 3}}).encode()
    with pytest.raises(ValueError, match="This is not a DataLoader state"):
        iter(make()).set_state(truncated_grain_state)
    with pytest.raises(ValueError, match="not valid JSON"):
        iter(make()).set_state(b"{not json")
    truncated = json.loads(state_after(make()))
    del truncated["sampler"]
    with pytest.raises(ValueError, match="truncated: field 'sampler' is missing"):
        iter(make()).set_state(json.dumps(truncated).encode())
    with pytest.raises(TypeError, match="JSON bytes from get_state"):
        iter(make()).set_state(3)  # type: ignore[arg-type]


# --- Bad arguments -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"worker_count": -1}, ValueError, "worker_count must be an integer >= 0, got -1"),
        ({"worker_buffer_size": -2}, ValueError, "worker_buffer_size must be an integer >= 0"),
        ({"sampler": None}, TypeError, "sampler must answer sampler"),
        ({"operations": [len]}, TypeError, "DataLoader operations must be Map, RandomMap"),
        ({"data_source": 5}, TypeError, "A source must support len"),
        ({"read_options": 4}, TypeError, "read_options must be a grainfn.ReadOptions"),
        ({"shard_options": (0, 2)}, TypeError, "shard_options must be a grainfn ShardOptions"),
    ],
)
def test_bad_loader_arguments(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    arguments = {"data_source": [1, 2], "sampler": grain.SequentialSampler(2), **kwargs}
    with pytest.raises(error, match=message):
        grain.DataLoader(**arguments)


def test_a_sampler_without_shard_options_needs_them_from_the_loader() -> None:
    class Custom:
        def __len__(self) -> int:
            return 3

        def __getitem__(self, index: int) -> grain.RecordMetadata:
            return grain.RecordMetadata(index, record_key=2 - index)

    with pytest.raises(ValueError, match="DataLoader needs shard_options"):
        grain.DataLoader(data_source="abc", sampler=Custom())
    loader = grain.DataLoader(
        data_source="abc", sampler=Custom(), shard_options=grain.sharding.NoSharding()
    )
    assert list(loader) == ["c", "b", "a"]
