"""After any error a StreamIterator stands after the last element it returned, for every stage.

A transient fault is injected above each leaf of random stream pipelines (so
it surfaces inside whatever stages sit above: batch, filter, mix, repeat,
limit, ...); reading on must give exactly the fault-free elements, and the
state after the error must be the fault-free state after the same elements.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.iterator import MARK_EVERY
from grainfn._src.parallel.mp_prefetch import with_leaves
from grainfn.testing import assert_elements_equal

from faults.faulty import FaultError
from support.pipelines import build_stream, stream_specs

LIMIT = 200


class FailOnCall:
    """Passes elements through, raising FaultError on its `at`-th call only (counting from 0)."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, element: Any) -> Any:
        self.calls += 1
        if self.calls - 1 == self.at:
            raise FaultError(f"call {self.at}")
        return element


def with_fault(stream: Any, fault: FailOnCall) -> Any:
    return with_leaves(stream, lambda leaf: fn.map(fault, leaf))


def clean_run(stream: Any) -> tuple[list[Any], list[Any]]:
    """The elements (up to LIMIT) and the state after each, including before the first."""
    it = fn.iterate(stream)
    elements, states = [], [it.state]
    for element in itertools.islice(it, LIMIT):
        elements.append(element)
        states.append(it.state)
    return elements, states


@settings(max_examples=60, deadline=None)
@given(stream_specs(), st.integers(0, 20))
def test_a_transient_fault_anywhere_in_a_pipeline_loses_nothing(spec: Any, at: int) -> None:
    note(f"spec = {spec!r}")
    try:
        expected, states = clean_run(with_fault(build_stream(spec), FailOnCall(-1)))
    except (ValueError, TypeError):
        return  # a spec the builders refuse
    it = fn.iterate(with_fault(build_stream(spec), FailOnCall(at)))
    got: list[Any] = []
    errors = 0
    while len(got) < len(expected):
        try:
            got.append(next(it))
        except StopIteration:
            break
        except FaultError:
            errors += 1
            assert it.state == states[len(got)]  # nothing returned is lost, nothing ahead counted
    assert errors <= 1
    assert_elements_equal(got, expected)
    it.close()


def test_recovery_past_a_mark_replays_only_from_the_mark() -> None:
    # No state is read, so the iterator goes back to its last periodic mark:
    # MARK_EVERY batches in, while the fault comes 1541 batches in.
    fault = FailOnCall(3 * MARK_EVERY + 10)
    stream = fn.batch(2, with_fault(fn.from_dataset(fn.range(8 * MARK_EVERY)), fault))
    it = fn.iterate(stream)
    got = []
    with pytest.raises(FaultError):
        for batch in it:
            got.append(batch)
    delivered = len(got)
    assert delivered == (3 * MARK_EVERY + 10) // 2
    got.extend(it)
    assert np.concatenate(got).tolist() == list(range(8 * MARK_EVERY))
    replayed = 2 * (delivered - MARK_EVERY)  # elements from the mark to the last batch returned
    assert fault.calls == 8 * MARK_EVERY + 1 + replayed


def test_close_after_an_error_keeps_the_exact_state() -> None:
    stream = fn.batch(3, with_fault(fn.from_dataset(fn.range(30)), FailOnCall(7)))
    it = fn.iterate(stream)
    assert [b.tolist() for b in itertools.islice(it, 2)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(FaultError):
        next(it)
    it.close()
    assert it.state == fn.DatasetPosition(6)
    with pytest.raises(ValueError, match="closed"):
        next(it)


class KeepsLessLater:
    """A filter with hidden state: after 12 calls it drops everything."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, element: Any) -> bool:
        self.calls += 1
        return self.calls <= 12


def test_a_stream_that_is_not_a_function_of_its_state_cannot_go_back() -> None:
    leaf = with_fault(fn.from_dataset(fn.range(20)), FailOnCall(9))
    it = fn.iterate(fn.batch(2, fn.filter(KeepsLessLater(), leaf)))
    assert [b.tolist() for b in itertools.islice(it, 4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(FaultError):
        next(it)
    with pytest.raises(RuntimeError, match="do not depend on the state alone"):
        next(it)


class FailOnCalls(FailOnCall):
    """Raises FaultError on `times` calls in a row from the `at`-th: a retry may fail again."""

    def __init__(self, at: int, times: int) -> None:
        super().__init__(at)
        self.times = times

    def __call__(self, element: Any) -> Any:
        self.calls += 1
        if self.at <= self.calls - 1 < self.at + self.times:
            raise FaultError(f"call {self.calls - 1}")
        return element


def elastic(stream: Any, shards: int) -> Any:
    """All logical shards of `stream` on one host, in global batches of 2 rows per shard."""
    return fn.elastic_batches(2 * shards, fn.batch(1, stream), num_logical_shards=shards)


@settings(max_examples=60, deadline=None)
@given(stream_specs(), st.floats(0, 1), st.integers(1, 3), st.sampled_from([1, 2, 4]))
def test_a_transient_fault_in_an_elastic_pipeline_loses_nothing(
    spec: Any, where: float, times: int, shards: int
) -> None:
    # The shards read together (one dataset read) or each alone, ahead in blocks; a fault
    # raised while reading, replaying or handing reading back must cost no row.
    note(f"spec = {spec!r}")
    counting = FailOnCall(-1)
    try:
        expected, states = clean_run(elastic(with_fault(build_stream(spec), counting), shards))
    except (ValueError, TypeError):
        return  # a spec the builders refuse, or elements that do not stack
    fault = FailOnCalls(int(where * counting.calls), times)
    it = fn.iterate(elastic(with_fault(build_stream(spec), fault), shards))
    got: list[Any] = []
    for _ in range(len(expected) + 3 * times):  # each fault may stop one read
        if len(got) == len(expected):
            break
        try:
            got.append(next(it))
        except StopIteration:
            break
        except FaultError:
            event("a fault")
            state = None
            for _ in range(times):  # going back there reads again, and may meet the fault
                with contextlib.suppress(FaultError):
                    state = it.state
                    break
            assert state in (None, states[len(got)])  # nothing returned is lost or skipped
    assert_elements_equal(got, expected)
    it.close()
