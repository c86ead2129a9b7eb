"""StreamIterator: fast iteration that loses no element to an error, one reader at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.filter_check import RAISE_SETTING, FilterCheck, WithOptionsStream
from grainfn._src.core.iterator import (
    MARK_EVERY,
    ConcurrentReadError,
    StreamIterator,
    open_iterator,
)


class FailsOnce:
    """`x -> x`, raising once at each of `positions` (a transient fault)."""

    def __init__(self, *positions: int) -> None:
        self.left = set(positions)

    def __call__(self, x: int) -> int:
        if x in self.left:
            self.left.discard(x)
            raise OSError(f"transient fault at {x}")
        return x


def test_the_state_is_after_the_elements_returned_and_resumes_there() -> None:
    stream = fn.batch(2, fn.from_dataset(fn.range(7)))
    it = StreamIterator(stream)
    assert next(it).tolist() == [0, 1]
    assert it.state == fn.DatasetPosition(2)
    resumed = StreamIterator(stream, it.state)
    assert [b.tolist() for b in resumed] == [[2, 3], [4, 5], [6]]
    assert iter(resumed) is resumed


def test_a_state_out_of_jit_is_taken_and_a_bad_state_refused() -> None:
    stream = fn.from_dataset(fn.range(5))
    assert StreamIterator(stream, fn.DatasetPosition(np.int32(3))).next_element() == 3
    with pytest.raises(ValueError, match="position"):
        StreamIterator(stream, fn.DatasetPosition(-1))


@pytest.mark.parametrize("position", [3, MARK_EVERY + 5])
def test_a_transient_fault_loses_no_element(position: int) -> None:
    stream = fn.map(FailsOnce(position), fn.from_dataset(fn.range(MARK_EVERY + 10)))
    it = StreamIterator(stream)
    got = [next(it) for _ in range(position)]
    with pytest.raises(OSError, match=f"transient fault at {position}"):
        next(it)
    assert it.state == fn.DatasetPosition(position)  # after the last element returned
    got.extend(it)
    assert got == list(range(MARK_EVERY + 10))


def test_a_fault_in_a_stage_between_elements_is_read_again_from_the_mark() -> None:
    failing = FailsOnce(5)
    evens = fn.filter(lambda x: x % 2 == 0, fn.map(failing, fn.from_dataset(fn.range(20))))
    stream = fn.batch(3, evens)
    it = StreamIterator(stream)
    assert next(it).tolist() == [0, 2, 4]
    with pytest.raises(OSError):
        next(it)  # fails inside the second batch, after reading 5 positions
    assert it.state == fn.DatasetPosition(5)  # after the first batch's positions
    assert [b.tolist() for b in it] == [[6, 8, 10], [12, 14, 16], [18]]


def test_an_element_that_always_fails_raises_every_time() -> None:
    def broken(x: int) -> int:
        if x == 2:
            raise KeyError("bad record")
        return x

    it = StreamIterator(fn.map(broken, fn.from_dataset(fn.range(5))))
    assert [next(it), next(it)] == [0, 1]
    for _ in range(2):
        with pytest.raises(KeyError, match="bad record"):
            next(it)
        assert it.state == fn.DatasetPosition(2)


def test_a_second_reader_inside_next_is_refused_and_takes_nothing() -> None:
    it: StreamIterator[Any]

    def reads_again(x: int) -> int:
        if x == 1:
            next(it)
        return x

    it = StreamIterator(fn.map(reads_again, fn.from_dataset(fn.range(4))))
    assert next(it) == 0
    with pytest.raises(ConcurrentReadError, match="being read by another next"):
        next(it)
    assert it.state == fn.DatasetPosition(1)


def test_the_state_asked_inside_next_is_the_boundary_before_the_element() -> None:
    it: StreamIterator[Any]
    seen: list[Any] = []
    asking = [False]

    def asks(batch: Any) -> Any:
        if not asking[0]:  # (finding the state reads the elements since the mark again)
            asking[0] = True
            seen.append(it.state)  # as a signal handler interrupting next() would
            asking[0] = False
        return batch

    stream = fn.map(asks, fn.batch(2, fn.from_dataset(fn.range(6))))
    it = StreamIterator(stream)
    list(it)
    assert seen == [fn.DatasetPosition(0), fn.DatasetPosition(2), fn.DatasetPosition(4)]


def test_a_closed_iterator_keeps_its_state_and_reads_nothing() -> None:
    it = StreamIterator(fn.from_dataset(fn.range(4)))
    next(it)
    it.close()
    it.close()  # twice is fine
    assert it.state == fn.DatasetPosition(1)
    with pytest.raises(ValueError, match="This iterator is closed"):
        next(it)


def test_a_function_with_hidden_state_cannot_be_read_again_and_says_so() -> None:
    keep = [True]

    def changes(x: int) -> bool:
        return keep[0]  # not a function of x alone

    def fails_at_4(x: int) -> int:
        if x == 4:
            keep[0] = False  # from now on the filter drops everything
            raise OSError("transient fault at 4")
        return x

    stream = fn.map(fails_at_4, fn.filter(changes, fn.from_dataset(fn.range(50))))
    it = StreamIterator(stream)
    assert [next(it) for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(OSError):
        next(it)
    with pytest.raises(RuntimeError, match="do not depend on the state alone"):
        next(it)


def test_open_iterator_applies_the_options_filter_check() -> None:
    dropped = fn.filter(lambda x: x % 10 == 0, fn.from_dataset(fn.range(3000)))
    plain = StreamIterator(dropped)
    assert len(list(plain)) == 300  # the stages of fn do not check
    options = WithOptionsStream(dropped, ((RAISE_SETTING, 0.5),))
    it = open_iterator(options)
    assert it.stream.parent.check == FilterCheck(0.9, 0.5)  # under the options
    with pytest.raises(ValueError, match=r"dropped 90\.00% of the last 1000 elements"):
        list(it)
