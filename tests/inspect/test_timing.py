"""Per-stage timing: same elements and states, plausible statistics, Grain's debug-mode switch."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given

import grainfn as grain
from grainfn import fn, testing
from grainfn._src.inspect import timing
from grainfn._src.inspect.timing import TimedDataset, TimedStream

from support.gated import gated_load

SLEEP = 0.005


class StageClock:
    """The timing stages' clock in tests that compare stages: only `slow` moves it, so
    which stage is slowest never depends on how the machine schedules the test."""

    def __init__(self) -> None:
        self.ns = 0

    def perf_counter_ns(self) -> int:
        return self.ns


CLOCK = StageClock()


def slow(x: Any) -> Any:
    CLOCK.ns += int(SLEEP * 1e9)
    return x


@pytest.fixture
def stage_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "time", CLOCK)


def double(x: Any) -> Any:
    return x * 2


@pytest.fixture
def debug_mode() -> Iterator[None]:
    grain.config.update("py_debug_mode", True)
    try:
        yield
    finally:
        grain.config.update("py_debug_mode", False)


def read_with_states(stream: Any, state: Any = None, limit: int = 200) -> list[tuple[Any, Any]]:
    it = fn.iterate(stream, state)
    out = []
    for element in it:
        out.append((element, it.state))
        if len(out) >= limit:
            break
    return out


@given(testing.streams())
def test_timed_streams_yield_the_same_elements_and_states(stream: Any) -> None:
    plain = read_with_states(stream)
    timed = fn.timed(stream)
    again = read_with_states(timed)
    assert len(again) == len(plain)
    for (a, state_a), (b, state_b) in zip(plain, again):
        testing.assert_elements_equal(a, b)
        assert state_a == state_b
        assert fn.state_to_dict(stream, state_a) == fn.state_to_dict(timed, state_b)
    if plain:
        middle = plain[len(plain) // 2][1]  # resume each from the other's state
        resumed = read_with_states(timed, middle)
        expected = read_with_states(stream, middle)
        assert len(resumed) == len(expected)
        for (a, state_a), (b, state_b) in zip(expected, resumed):
            testing.assert_elements_equal(a, b)
            assert state_a == state_b


@given(testing.dataset_specs())
def test_timed_datasets_read_the_same(spec: Any) -> None:
    try:  # some specs are invalid (e.g. batch after filter) and do not build
        ds = testing.build_dataset(spec)
        ds.get_many(range(min(ds.length, 50)))
    except (ValueError, TypeError, OverflowError, IndexError):
        assume(False)
    timed = fn.timed(ds)
    assert isinstance(timed, TimedDataset) and timed.length == ds.length
    count = min(ds.length, 50)
    testing.assert_elements_equal(timed.get_many(range(count)), ds.get_many(range(count)))
    if ds.length:
        testing.assert_elements_equal(timed.get(count - 1), ds.get(count - 1))


def test_timing_leaves_the_pipeline_unchanged_and_names_every_stage() -> None:
    ds = fn.map(double, fn.shuffle(fn.range(10), seed=1))
    stream = fn.batch(2, fn.from_dataset(ds))
    before = repr(stream)
    timed = fn.timed(stream)
    assert repr(stream) == before == repr(timed)  # timing stages add no line
    assert fn.timed(timed) is timed
    assert isinstance(timed, TimedStream)
    with pytest.raises(ValueError, match="not timed"):
        fn.stage_stats(stream)
    list(fn.iterate(timed))
    stats = fn.stage_stats(timed)
    assert [(s.stage, s.depth) for s in stats] == [
        ("batch(2)", 0),
        ("from_dataset()", 1),
        ("map(double)", 2),
        ("shuffle(seed=1)", 3),
        ("range(0, 10, 1)", 4),
    ]
    assert stats[0].elements == 5
    assert all(s.elements == 10 for s in stats[1:])
    assert all(0 <= s.self_seconds <= s.total_seconds for s in stats)
    assert all(stats[i].total_seconds >= stats[i + 1].total_seconds for i in range(4))
    assert stats[1].mean_seconds == pytest.approx(stats[1].total_seconds / 10)


def test_a_sleeping_stage_has_the_most_self_time(stage_clock: None) -> None:
    ds = fn.map(double, fn.map(slow, fn.map(double, fn.range(12))))
    it = fn.iterate(fn.timed(fn.from_dataset(ds)))
    assert list(it) == [x * 4 for x in range(12)]
    stats = fn.stage_stats(it)
    slowest = max(stats, key=lambda s: s.self_seconds)
    assert slowest.stage == "map(slow)"
    assert slowest.self_seconds == pytest.approx(12 * SLEEP)
    text = fn.describe_text(it)
    assert "map(slow)  [length 12]  | " in text
    assert "12 elements" in text and "self" in text and "/element" in text


def test_timed_mix_of_streams_splits_time_between_branches(stage_clock: None) -> None:
    fast = fn.from_dataset(fn.range(20))
    sleepy = fn.from_dataset(fn.map(slow, fn.range(20)))
    timed = fn.timed(fn.mix([fast, sleepy], [1, 1]))
    assert list(fn.iterate(timed)) == list(fn.iterate(fn.mix([fast, sleepy], [1, 1])))
    records = fn.stage_stats(timed)
    stats = {s.stage: s for s in records}
    assert stats["map(slow)"].self_seconds == max(s.self_seconds for s in records)
    mix = stats["mix(weights=[1.0, 1.0])"]
    assert mix.total_seconds >= stats["map(slow)"].total_seconds
    assert [s.depth for s in records if s.stage == "range(0, 20, 1)"] == [2, 3]


def test_debug_mode_times_new_iterators_only(debug_mode: None) -> None:
    ds = grain.MapDataset.range(8).seed(3).shuffle().map(double).to_iter_dataset().batch(2)
    it = iter(ds)
    first = [next(it).tolist() for _ in range(2)]
    state = it.get_state()
    stats = grain.stage_stats(it)
    assert stats[0].stage == "batch(2, sort_keys=True)" and stats[0].elements == 2
    assert "| " in grain.describe_text(it)
    rest = [b.tolist() for b in it]
    it.set_state(state)  # resuming keeps timing and counts on
    assert [b.tolist() for b in it] == rest
    assert grain.stage_stats(it)[0].elements == 2 + 2 * len(rest)
    grain.config.update("py_debug_mode", False)
    plain = iter(ds)
    assert [b.tolist() for b in plain] == first + rest
    with pytest.raises(ValueError, match="not timed"):
        grain.stage_stats(plain)
    plain.set_state(state)
    assert [b.tolist() for b in plain] == rest
    assert plain.get_state() == it.get_state()


def test_debug_mode_times_data_loaders(debug_mode: None) -> None:
    loader = grain.load(list(range(10)), num_epochs=1, batch_size=4, shuffle=True, seed=3)
    it = iter(loader)
    batches = [b.tolist() for b in it]
    grain.config.update("py_debug_mode", False)
    assert batches == [b.tolist() for b in loader]
    stats = grain.stage_stats(it)
    assert stats[0].stage == "from_dataset()" and stats[0].elements == 3
    assert any(s.stage.startswith("sample(IndexSampler") for s in stats)


def test_worker_processes_are_timed_as_one_stage(debug_mode: None) -> None:
    ds = grain.MapDataset.range(16).map(double).to_iter_dataset().batch(4)
    prefetched = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    with iter(prefetched) as it:
        assert [b.tolist() for b in it] == [b.tolist() for b in ds]
        stats = grain.stage_stats(it)
        text = grain.describe_text(it)
    assert [s.stage for s in stats] == ["batch(4, sort_keys=True)", "from_dataset()"]
    assert "worker processes" in stats[1].note
    assert stats[1].elements == 16
    lines = text.splitlines()
    assert lines[0] == "mp_prefetch(2)"
    assert lines[3] == "      └─ map(double)  [length 16]"  # not timed one by one
    assert "worker processes" in lines[2]


def test_timing_says_who_read_the_elements_here_and_in_the_workers(tmp_path: Path) -> None:
    # The workers cannot load the pipeline until 40 elements were read here.
    gate = tmp_path / "open"
    stream = fn.batch(4, fn.from_dataset(gated_load(fn.map(double, fn.range(400)), str(gate))))
    it = fn.iterate(fn.timed(fn.mp_prefetch(2, stream)))
    try:
        head = list(itertools.islice(it, 10))
        gate.touch()
        rest = list(it)
        [_, reads] = fn.stage_stats(it)
    finally:
        gate.touch()
        it.close()
    assert [b.tolist() for b in head + rest] == [b.tolist() for b in fn.iterate(stream)]
    assert reads.read_here >= 40 and reads.read_here + reads.read_elsewhere == 400


def test_timing_counts_every_element_in_the_workers_where_they_are_pinned() -> None:
    stream = fn.from_dataset(fn.map(double, fn.range(100)))
    it = fn.iterate(fn.timed(fn.mp_prefetch(2, stream, adaptive=False)))
    try:
        assert list(it) == [2 * x for x in range(100)]
        [reads] = fn.stage_stats(it)
        text = fn.describe_text(it)
    finally:
        it.close()
    assert (reads.read_here, reads.read_elsewhere) == (0, 100)
    assert "0 read here, 100 by the executor" in text


def test_counters_survive_pickling() -> None:
    timed = fn.timed(fn.map(double, fn.range(4)))
    timed.get_many([0, 1, 2])
    copy = pickle.loads(pickle.dumps(timed))
    assert copy.counter.elements == 3
    copy.get(0)
    assert copy.counter.elements == 4 and timed.counter.elements == 3


def test_timed_refuses_other_values() -> None:
    with pytest.raises(TypeError, match=r"timed takes a grainfn Dataset or Stream, got \[1\]"):
        fn.timed([1])
    with pytest.raises(TypeError, match="stage_stats takes"):
        fn.stage_stats(3)
