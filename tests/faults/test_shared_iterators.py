"""One iterator, several callers: each element once, and states only at element boundaries.

A grainfn iterator has one reader at a time: a `next()` while another runs
raises `ConcurrentReadError` and takes nothing. The state asked from another
thread while a `next()` runs waits for it; asked inside a running `next()` (a
signal handler) it names the boundary before the element being read, never a
position half-way through a batch.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.core.iterator import ConcurrentReadError

from faults.harness import reference_states
from support.leaks import assert_nothing_left
from support.waiting import GENEROUS, wait_until

N = 3000


def yields_the_gil(x: int) -> int:
    """`x`, letting other threads run: the readers interleave inside `next()`."""
    time.sleep(0)
    return x


class YieldsTheGil(grain.transforms.Map):
    def map(self, x: int) -> int:
        return yields_the_gil(x)


def plain() -> Any:
    return fn.iterate(fn.from_dataset(fn.map(yields_the_gil, fn.range(N))))


def batched() -> Any:
    stream = fn.map(yields_the_gil, fn.from_dataset(fn.range(N)))
    return fn.iterate(fn.batch(7, fn.filter(lambda x: x % 5 != 0, stream)))


def facade() -> Any:
    return iter(grain.MapDataset.range(N).map(yields_the_gil).to_iter_dataset().batch(3))


def workers() -> Any:
    ds = grain.MapDataset.range(N).to_iter_dataset().map(yields_the_gil)
    return iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))


def loader() -> Any:
    return iter(
        grain.DataLoader(
            data_source=list(range(N)),
            sampler=grain.SequentialSampler(N),
            operations=[YieldsTheGil(), grain.transforms.Batch(4)],
            worker_count=0,
        )
    )


MAKERS: dict[str, Callable[[], Any]] = {
    "fn.iterate": plain,
    "fn.iterate+filter+batch": batched,
    "facade batch": facade,
    "mp_prefetch": workers,
    "DataLoader": loader,
}


def numbers(elements: list[Any]) -> list[int]:
    return [int(x) for e in elements for x in np.asarray(e).ravel()]


@pytest.mark.parametrize("name", MAKERS)
def test_threads_sharing_an_iterator_get_each_element_once(name: str) -> None:
    expected = numbers(list(MAKERS[name]()))
    it = MAKERS[name]()
    got: list[list[Any]] = [[] for _ in range(4)]
    refused = [0] * 4
    errors: list[BaseException] = []

    def read(k: int) -> None:
        try:
            while True:
                try:
                    got[k].append(next(it))
                except ConcurrentReadError:
                    refused[k] += 1  # another thread is reading: nothing was taken
                    time.sleep(0.0005)
                except StopIteration:
                    return
        except BaseException as error:  # anything else fails the test
            errors.append(error)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GENEROUS)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    assert errors == []
    delivered = numbers([e for part in got for e in part])
    assert sorted(delivered) == sorted(expected)  # each once: none twice, none lost
    if hasattr(it, "close"):
        it.close()
    assert_nothing_left()


def test_a_second_next_is_refused_with_a_message_that_says_what_to_do(tmp_path: Path) -> None:
    release = tmp_path / "release"
    it = fn.iterate(fn.from_dataset(fn.map(HoldAt(0, release), fn.range(10))))
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(next(it)))
    first.start()
    wait_until(lambda: (tmp_path / "release.holding").exists(), "the first reader held 0")
    with pytest.raises(ConcurrentReadError, match="one reader at a time"):
        next(it)
    release.touch()
    first.join(GENEROUS)
    assert results == [0]
    assert list(it) == list(range(1, 10))  # the refused call took nothing


class HoldAt:
    """Holds element `at` until `path` exists, saying so in `path.holding`."""

    def __init__(self, at: int, path: Path) -> None:
        self.at, self.path = at, path

    def __call__(self, x: int) -> int:
        if x == self.at and not self.path.exists():
            Path(f"{self.path}.holding").touch()
            wait_until(self.path.exists, f"{self.path} was created")
        return x


def held_batches(release: Path) -> Any:
    """Batches of 4 of range(40), element 2 held until `release` exists."""
    ds = grain.MapDataset.range(40).map(HoldAt(2, release)).to_iter_dataset().batch(4)
    return iter(ds)


def test_a_state_asked_from_another_thread_during_next_names_a_boundary(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    release.touch()
    states = reference_states(lambda: held_batches(release))
    release.unlink()
    it = held_batches(release)
    batch: list[Any] = []
    reader = threading.Thread(target=lambda: batch.append(next(it)))
    reader.start()  # waits inside next() at element 2
    wait_until(lambda: (tmp_path / "release.holding").exists(), "the reader held element 2")
    asked: list[Any] = []
    asker = threading.Thread(target=lambda: asked.append(it.get_state()))
    asker.start()  # waits for the running next()
    release.touch()
    reader.join(GENEROUS)
    asker.join(GENEROUS)
    assert batch[0].tolist() == [0, 1, 2, 3]
    assert asked == [states[1]]  # after the batch that next() returned, not inside it
    assert [b.tolist() for b in it] == [[4 * i + j for j in range(4)] for i in range(1, 10)]


class SignalsAt:
    """Sends this process SIGUSR1 while it computes element `at`: a preemption notice that
    arrives in the middle of a `next()`."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.consumer = os.getpid()  # a worker process signals the consumer, not itself

    def __call__(self, x: int) -> int:
        if x == self.at:
            os.kill(self.consumer, signal.SIGUSR1)
        return x


def signalled_batches(face: str) -> Any:
    """Batches of 4 of range(40); computing element 13 (in batch 3) sends SIGUSR1."""
    ds = grain.MapDataset.range(40).map(SignalsAt(13))
    if face == "fn.iterate":
        return fn.iterate(fn.batch(4, fn.from_dataset(ds.core)))
    it = ds.to_iter_dataset().batch(4)
    if face == "facade, 2 workers":
        return iter(it.mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))
    return iter(it)


FACES = ["fn.iterate", "facade", "facade, 2 workers"]


@pytest.mark.parametrize("face", FACES)
def test_a_state_asked_inside_next_from_a_signal_handler_names_the_boundary_before_it(
    face: str,
) -> None:
    """A preemption notice that arrives while a batch is being read (element 13 is read
    ahead, with the block around it) saves the state after the batches delivered:
    restoring it reads the next batch again, whole; nothing is lost or regrouped."""

    def get_state(it: Any) -> Any:
        return it.get_state() if hasattr(it, "get_state") else fn.state_to_dict(it.stream, it.state)

    with_no_signal = signalled_batches(face)
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        states = [get_state(with_no_signal)]
        for _ in with_no_signal:
            states.append(get_state(with_no_signal))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    it = signalled_batches(face)
    saved: list[Any] = []
    batches: list[Any] = []
    previous = signal.signal(
        signal.SIGUSR1, lambda signum, frame: saved.append((len(batches), get_state(it)))
    )
    try:
        for batch in it:
            batches.append(np.asarray(batch).tolist())
    finally:
        signal.signal(signal.SIGUSR1, previous)
    expected = [[4 * i + j for j in range(4)] for i in range(10)]
    assert batches == expected
    assert len(saved) == 1
    delivered, state = saved[0]
    assert delivered <= 3  # the signal came while a batch up to batch 3 was being read
    assert state == states[delivered]  # the boundary after what was delivered
    resumed = signalled_batches(face)
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        if hasattr(resumed, "set_state"):
            resumed.set_state(state)
        else:
            resumed = fn.iterate(resumed.stream, fn.state_from_dict(resumed.stream, state))
        assert [np.asarray(b).tolist() for b in resumed] == expected[delivered:]
    finally:
        signal.signal(signal.SIGUSR1, previous)
