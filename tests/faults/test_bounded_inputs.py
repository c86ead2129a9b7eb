"""Nothing endless: a count the data cannot use costs nothing, a timeout poll() cannot take is
refused when made, and a KeyboardInterrupt a worker's function raises is an error at its place.

Each case was seen costing time in proportion to a huge count before the first element
(logical shards, Grain's worker order: half a minute and more), passing its check and then
failing with a raw OverflowError at the first `next()`, or being reported as a worker that
called `os._exit`; each test failed before its fix.
"""

from __future__ import annotations

import dataclasses
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.parallel.processes import WorkerError

from faults.faulty import Fault
from faults.harness import payload, read_through, reference_states
from support.leaks import assert_nothing_left
from support.waiting import no_hang

HUGE_SHARDS = 2**20
HUGE_WORKERS = 10**6
POSITIONS = 100  # of the data each huge count is asked to cut


def hundred() -> grain.IterDataset:
    return grain.MapDataset.range(POSITIONS).to_iter_dataset()


def hundred_loader(workers: int) -> Any:
    return grain.DataLoader(
        data_source=list(range(POSITIONS)),
        sampler=grain.samplers.SequentialSampler(POSITIONS),
        worker_count=workers,
        grain_worker_order=True,
    )


HUGE_COUNTS: dict[str, tuple[str, int, Callable[[], Any]]] = {
    # name: (the option the error names, its value, what builds or reads the first element)
    "fn.elastic_batches": (
        "num_logical_shards",
        HUGE_SHARDS,
        lambda: fn.elastic_batches(
            HUGE_SHARDS, fn.range(POSITIONS), num_logical_shards=HUGE_SHARDS
        ),
    ),
    "ElasticIterator num_logical_shards": (
        "num_logical_shards",
        HUGE_SHARDS,
        lambda: grain.experimental.ElasticIterator(
            hundred(), HUGE_SHARDS, grain.ShardOptions(0, 1), num_logical_shards=HUGE_SHARDS
        ),
    ),
    "ElasticIterator shard_count": (  # one logical shard per host: this host builds only one
        "num_logical_shards",
        HUGE_SHARDS,
        lambda: grain.experimental.ElasticIterator(
            hundred(), HUGE_SHARDS, grain.ShardOptions(0, HUGE_SHARDS)
        ),
    ),
    "fn.grain_worker_order": (
        "num_workers",
        HUGE_WORKERS,
        lambda: fn.grain_worker_order(HUGE_WORKERS, fn.from_dataset(fn.range(POSITIONS))),
    ),
    "fn.grain_worker_order sequential": (
        "num_workers",
        HUGE_WORKERS,
        lambda: fn.grain_worker_order(
            HUGE_WORKERS, fn.from_dataset(fn.range(POSITIONS)), sequential=True
        ),
    ),
    "IterDataset.mp_prefetch grain_worker_order": (
        "num_workers",
        HUGE_WORKERS,
        lambda: hundred().mp_prefetch(
            grain.MultiprocessingOptions(HUGE_WORKERS), grain_worker_order=True
        ),
    ),
    "DataLoader grain_worker_order": (
        "worker_count",
        HUGE_WORKERS,
        lambda: next(iter(hundred_loader(HUGE_WORKERS))),
    ),
}


@pytest.mark.parametrize("name", HUGE_COUNTS)
def test_a_count_far_past_the_data_is_refused_at_once_naming_what_is_allowed(name: str) -> None:
    option, count, build = HUGE_COUNTS[name]
    words = (
        rf"{option}={count} is more than 1024 and more than the {POSITIONS} positions .* "
        rf"shards {POSITIONS} to {count - 1} would read nothing.* Use {option} in \[1, 1024\]\."
    )
    tracemalloc.start()
    try:
        with no_hang(f"{name} with {option}={count}"), pytest.raises(ValueError, match=words) as e:
            build()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Nothing was built per shard or worker: a million of anything is tens of megabytes at
    # least (what the first call imports is less than one).
    assert peak < 8 * 2**20, f"refusing {option}={count} peaked at {peak} bytes"
    if name == "ElasticIterator shard_count":  # it names an option the caller did not pass
        assert e.value.__notes__ == [
            f"num_logical_shards was not given: it is shard_count, {count}."
        ]


@pytest.mark.grain
def test_grains_own_elastic_mode_builds_nothing_per_host_and_takes_any_count_as_grain() -> None:
    import grain as google_grain

    ours = grain.experimental.ElasticIterator(
        grain.MapDataset.range(POSITIONS), HUGE_SHARDS, grain.ShardOptions(0, HUGE_SHARDS)
    )
    theirs = google_grain.experimental.ElasticIterator(
        google_grain.MapDataset.range(POSITIONS),
        HUGE_SHARDS,
        google_grain.sharding.ShardOptions(0, HUGE_SHARDS),
    )
    with no_hang(f"Grain's elastic mode with shard_count={HUGE_SHARDS}"):
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs] == [[0]]
    assert ours.get_state() == theirs.get_state() == {"global_next_index": HUGE_SHARDS}


def test_logical_shards_up_to_the_data_or_1024_are_taken_with_their_data() -> None:
    data = fn.from_dataset(fn.range(2048))
    one = fn.elastic_batches(2048, data, num_logical_shards=2048)  # shard s: element s alone
    assert [b.tolist() for b in fn.iterate(one)] == [list(range(2048))]
    with pytest.raises(ValueError, match=r"num_logical_shards=2049 .* in \[1, 2048\]\."):
        fn.elastic_batches(2049, data, num_logical_shards=2049)
    # Up to 1024 whatever the data, as before: shards past the 10 positions leave no batch.
    assert list(fn.iterate(fn.elastic_batches(1024, fn.range(10), num_logical_shards=1024))) == []


def test_grains_worker_order_takes_up_to_1024_workers_whatever_the_data() -> None:
    batches = fn.batch(2, fn.from_dataset(fn.range(10)))
    ten = [b.tolist() for b in fn.iterate(fn.grain_worker_order(10, batches))]
    assert ten == [[k] for k in range(10)]  # each worker batches its one position
    assert [b.tolist() for b in fn.iterate(fn.grain_worker_order(1024, batches))] == ten
    with pytest.raises(ValueError, match=r"num_workers=1025 .* in \[1, 1024\]\. Or read in"):
        fn.grain_worker_order(1025, batches)
    loader = grain.DataLoader(
        data_source=list(range(10)),
        sampler=grain.samplers.SequentialSampler(10),
        worker_count=1024,
        grain_worker_order=True,
    )
    assert list(loader) == list(range(10))
    assert_nothing_left()


LONGEST_TIMEOUT = 2147483
"""The longest worker_timeout, in seconds: (2**31 - 1) milliseconds, what poll() takes."""

TOO_LONG = [LONGEST_TIMEOUT + 1, 2147483.648, 9.2e9, 1e10, 1e300]
"""Past the longest wait poll() takes: each passed the check, then failed at the first `next()`
with a raw OverflowError ("timeout is too large", or "timestamp too large" from 9.3e9 on)."""


@pytest.mark.parametrize("seconds", TOO_LONG, ids=repr)
def test_a_worker_timeout_poll_cannot_take_is_refused_when_made(seconds: float) -> None:
    builders: dict[str, Callable[[], Any]] = {
        "worker_timeout": lambda: fn.mp_prefetch(2, fn.range(4), worker_timeout=seconds),
        "MultiprocessingOptions.worker_timeout": lambda: grain.MultiprocessingOptions(
            num_workers=2, worker_timeout=seconds
        ),
        "worker_timeout ": lambda: grain.DataLoader(
            data_source=[1, 2],
            sampler=grain.samplers.SequentialSampler(2),
            worker_count=2,
            worker_timeout=seconds,
        ),
    }
    for name, build in builders.items():
        with pytest.raises(ValueError) as refused:
            build()
        assert str(refused.value) == (
            f"{name.strip()} must be at most 2147483 seconds (about 24.8 days, the longest wait "
            f"poll() takes), got {seconds!r}. Pass None to wait for a worker as long as it lives."
        )


def times_ten(x: int) -> int:
    return x * 10


class TimesTen(grain.transforms.Map):
    def map(self, element: Any) -> Any:
        return times_ten(element)


def test_the_longest_worker_timeout_is_taken_and_waited_with() -> None:
    options = grain.MultiprocessingOptions(num_workers=2, worker_timeout=LONGEST_TIMEOUT)
    assert options.worker_timeout == LONGEST_TIMEOUT
    # A worker_timeout pins the work to the workers: the parent waits on them with it.
    stream = fn.mp_prefetch(2, fn.map(times_ten, fn.range(20)), worker_timeout=LONGEST_TIMEOUT)
    assert list(fn.iterate(stream)) == [x * 10 for x in range(20)]
    loader = grain.DataLoader(
        data_source=list(range(20)),
        sampler=grain.samplers.SequentialSampler(20),
        operations=[TimesTen()],
        worker_count=2,
        worker_timeout=LONGEST_TIMEOUT,
    )
    assert list(loader) == [x * 10 for x in range(20)]
    assert_nothing_left()


N = 100
AT = 57


@dataclasses.dataclass(frozen=True)
class InterruptsAt(Fault):
    """`x -> x`, raising KeyboardInterrupt at the elements in `at` (the first `times` times)."""

    def __call__(self, x: Any) -> Any:
        if int(x) in self.at and self._fires(int(x)):
            raise KeyboardInterrupt
        return x


class MapOf(grain.transforms.Map):
    def __init__(self, function: Any) -> None:
        self.function = function

    def map(self, element: Any) -> Any:
        return self.function(element)


# adaptive=False: every read in the workers, the place of the fault (read in this process,
# the KeyboardInterrupt would be a Ctrl-C here, as Python makes it).
INTERRUPTED: dict[str, Callable[[Any], Any]] = {
    "fn.mp_prefetch": lambda f: grain.DatasetIterator.over(
        fn.mp_prefetch(2, fn.map(f, fn.range(N)), adaptive=False)
    ),
    "IterDataset.mp_prefetch": lambda f: iter(
        grain.MapDataset.range(N)
        .map(f)
        .to_iter_dataset()
        .mp_prefetch(grain.MultiprocessingOptions(num_workers=2, adaptive=False))
    ),
    "DataLoader": lambda f: iter(
        grain.DataLoader(
            data_source=list(range(N)),
            sampler=grain.samplers.SequentialSampler(N),
            operations=[MapOf(f)],
            worker_count=2,
            adaptive=False,
        )
    ),
}


def interrupted_words(position: int) -> str:
    return (
        f"The pipeline's code raised KeyboardInterrupt at position {position} in grainfn worker "
        r"\d \(pid \d+\)\. Workers ignore Ctrl-C"
    )


@pytest.mark.parametrize("face", INTERRUPTED)
def test_a_keyboard_interrupt_in_a_workers_map_is_an_error_at_its_position(
    face: str, tmp_path: Path
) -> None:
    states = reference_states(lambda: INTERRUPTED[face](lambda x: x))
    it = INTERRUPTED[face](InterruptsAt(str(tmp_path), frozenset({AT}), times=None))
    run = read_through(it, max_errors=3, catch=(WorkerError, KeyboardInterrupt))
    assert [int(np.asarray(e)) for e in run.elements] == list(range(AT))
    assert run.delivered_at_error == [AT] * 3  # raised again at each read, nothing skipped
    for error, state in zip(run.errors, run.states):
        assert isinstance(error, WorkerError), f"{type(error).__name__}: {error}"
        assert error.__notes__ and "KeyboardInterrupt" in error.__notes__[-1]  # its traceback
        assert payload(state) == payload(states[AT])  # before the position, every time
    assert len(run.errors) == 3
    for error in run.errors:
        with pytest.raises(WorkerError, match=interrupted_words(AT)):
            raise error
    it.close()
    assert_nothing_left()


@pytest.mark.parametrize("face", INTERRUPTED)
def test_after_a_keyboard_interrupt_in_a_worker_reading_on_loses_nothing(
    face: str, tmp_path: Path
) -> None:
    # A block that raises is read again one position at a time to find the failing one
    # (as for an exception), so the interrupt must happen twice to reach the consumer.
    it = INTERRUPTED[face](InterruptsAt(str(tmp_path), frozenset({AT}), times=2))
    run = read_through(it, max_errors=3, catch=(WorkerError, KeyboardInterrupt))
    assert len(run.errors) == 1 and run.delivered_at_error == [AT]
    with pytest.raises(WorkerError, match=interrupted_words(AT)):
        raise run.errors[0]
    assert [int(np.asarray(e)) for e in run.elements] == list(range(N))
    it.close()
    assert_nothing_left()


def interrupt_init(index: int, count: int) -> None:
    raise KeyboardInterrupt


def test_a_keyboard_interrupt_in_worker_init_fn_is_an_error_naming_it() -> None:
    it = fn.iterate(fn.mp_prefetch(2, fn.range(10), worker_init_fn=interrupt_init))
    with pytest.raises(WorkerError, match="worker_init_fn raised KeyboardInterrupt in grainfn"):
        next(it)
    it.close()
    assert_nothing_left()
