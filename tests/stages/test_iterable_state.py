"""A user's IterDataset whose iterator keeps its own state: the pipeline's state holds it.

`fn.from_iterable` over an iterable whose iterators have `get_state` and
`set_state` of their own keeps what `get_state()` gives (`IterableState`) and
restores by calling `set_state` on a fresh iterator, as Grain does; other
iterators keep being counted (`IterablePosition`).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import grain
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import grainfn
from grainfn import fn
from grainfn._src.stages.iterable import IterablePosition, IterableState, keeps_own_state

from support.waiting import wait_until


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "grainfn-thread-prefetch"]


def user_classes(module: Any, values: list[int], log: list[str] | None = None) -> Any:
    """A Grain user's dataset of `values`, whose iterator keeps its own state.

    `log` records each `set_state` and how many elements each iterator read,
    so a test sees that a restore does not read the elements again.
    """

    class Reader(module.DatasetIterator):
        def __init__(self) -> None:
            super().__init__()
            self.position, self.name = 0, "reader"

        def __next__(self) -> int:
            if self.position >= len(values):
                raise StopIteration
            self.position += 1
            if log is not None:
                log.append("read")
            return values[self.position - 1]

        def get_state(self) -> dict[str, Any]:
            return {"position": self.position, "source": [self.name]}

        def set_state(self, state: dict[str, Any]) -> None:
            if log is not None:
                log.append(f"set_state {state['position']}")
            self.position = state["position"]

    class Values(module.IterDataset):
        def __iter__(self) -> Any:
            return Reader()

    return Values


def pipeline(module: Any, values: list[int], log: list[str] | None = None) -> Any:
    ds = user_classes(module, values, log)()
    return ds.map(lambda x: x * 3).filter(lambda x: x % 2 == 0).batch(2)


def as_lists(batches: Any) -> list[list[int]]:
    return [b.tolist() for b in batches]


def test_the_pipeline_state_holds_the_user_iterators_own_and_a_restore_sets_it() -> None:
    log: list[str] = []
    ds = pipeline(grainfn, list(range(20)), log)
    it = iter(ds)
    head = as_lists([next(it), next(it)])
    state = it.get_state()
    assert state["state"] == {
        "kind": "IterableState",
        "user_state": {"position": 7, "source": ["reader"]},
    }
    assert json.loads(json.dumps(state)) == state
    rest = as_lists(it)
    log.clear()
    again = iter(ds)
    again.set_state(state)
    assert as_lists(again) == rest
    assert log[0] == "set_state 7"  # on a fresh iterator, which reads on from there
    assert log.count("read") == 13  # nothing read twice
    assert head + rest == as_lists(pipeline(grainfn, list(range(20))))


@given(st.lists(st.integers(0, 99), max_size=30), st.integers(0, 30), st.integers(0, 3))
def test_a_restore_from_any_state_reads_the_rest(values: list[int], at: int, ahead: int) -> None:
    ds = user_classes(grainfn, values)().map(lambda x: x + 1)
    if ahead:
        ds = grainfn.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=ahead)
    it = iter(ds)
    states = [it.get_state()]
    elements = []
    for element in it:
        elements.append(element)
        states.append(it.get_state())
    assert elements == [v + 1 for v in values]
    start = min(at, len(values))
    again = iter(ds)
    again.set_state(json.loads(json.dumps(states[start])))
    assert list(again) == elements[start:]
    if start:  # after an element, the state is the user iterator's, however far it read ahead
        assert states[start]["state"]["user_state"] == {"position": start, "source": ["reader"]}
    again.close()
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


@pytest.mark.grain
@settings(deadline=None)
@given(st.lists(st.integers(0, 99), max_size=30), st.integers(0, 30), st.booleans())
def test_a_state_grain_wrote_for_a_user_iterator_is_read(
    values: list[int], at: int, prefetched: bool
) -> None:
    def build(module: Any) -> Any:
        ds = pipeline(module, values)
        if prefetched:
            ds = module.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=2)
        return ds

    theirs = iter(build(grain))
    head = [next(theirs).tolist() for _ in range(min(at, len(as_lists(build(grain)))))]
    grain_state = theirs.get_state()
    note(f"Grain's state after {len(head)} batches: {grain_state!r}")
    assert grain_state == {"position": grain_state["position"], "source": ["reader"]}
    ours = iter(build(grainfn))
    ours.set_state(grain_state)
    assert as_lists(ours) == as_lists(theirs)
    ours.close()


@pytest.mark.grain
def test_grains_own_test_of_a_parent_that_sets_its_state() -> None:
    """Grain's prefetch_test `test_parent_dataset_modifies_state`, in grainfn's state format."""

    def build(module: Any) -> Any:
        class Ones(module.DatasetIterator):
            def __next__(self) -> int:
                return 1

            def get_state(self) -> dict[str, int]:
                return {"test": 1}

            def set_state(self, state: dict[str, int]) -> None:
                pass

        class OnesDataset(module.IterDataset):
            def __iter__(self) -> Any:
                return Ones()

        return module.experimental.ThreadPrefetchIterDataset(OnesDataset(), prefetch_buffer_size=1)

    theirs = iter(build(grain))
    theirs.set_state({"test": 2})
    assert theirs.get_state() == {"test": 1}
    ours = iter(build(grainfn))
    ours.set_state({"test": 2})  # Grain's state of this pipeline: the user iterator's own
    assert ours.get_state()["state"] == {"kind": "IterableState", "user_state": {"test": 2}}
    assert next(ours) == next(theirs) == 1
    assert ours.get_state()["state"]["user_state"] == theirs.get_state() == {"test": 1}
    ours.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


@pytest.mark.parametrize(
    ("user_state", "named"),
    [
        ({"position": np.int64(3)}, r"user_state\['position'\] holds .*3\)? \(int64\)"),
        ({"position": (3, 4)}, r"holds \(3, 4\) \(tuple\).*a tuple would come back as a list"),
        ({3: "three"}, r"has the key 3 \(int\).*dict keys are str"),
        ({"seen": {1, 2}}, r"user_state\['seen'\] holds \{1, 2\} \(set\)"),
        (b"raw", r"user_state holds b'raw' \(bytes\)"),
    ],
)
def test_a_user_state_that_is_not_json_is_refused_at_get_state_naming_its_type(
    user_state: Any, named: str
) -> None:
    class Odd(grainfn.DatasetIterator):
        def __init__(self) -> None:
            super().__init__()
            self.left = 3

        def __next__(self) -> int:
            if not self.left:
                raise StopIteration
            self.left -= 1
            return self.left

        def get_state(self) -> Any:
            return user_state

        def set_state(self, state: Any) -> None:
            pass

    class OddDataset(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return Odd()

    it = iter(OddDataset().map(lambda x: x * 2))
    assert next(it) == 4
    with pytest.raises(TypeError, match=named):
        it.get_state()
    assert list(it) == [2, 0]  # the refusal loses nothing
    assert it.core.state == IterableState(user_state)  # the record holds it as it is


def test_a_user_state_in_a_state_dict_must_be_json() -> None:
    stream = fn.from_iterable(user_classes(grainfn, [1, 2, 3])())
    saved = fn.state_to_dict(stream, IterableState({"position": 2, "source": ["reader"]}))
    assert saved["state"] == {
        "kind": "IterableState",
        "user_state": {"position": 2, "source": ["reader"]},
    }
    assert fn.state_from_dict(stream, saved) == IterableState({"position": 2, "source": ["reader"]})
    assert list(fn.iterate(stream, fn.state_from_dict(stream, saved))) == [3]
    bad = dict(saved, state={"kind": "IterableState", "user_state": {"position": (2,)}})
    with pytest.raises(ValueError, match=r"user_state\['position'\] holds \(2,\) \(tuple\)"):
        fn.state_from_dict(stream, bad)
    with pytest.raises(ValueError, match="field user_state of IterableState is missing"):
        fn.state_from_dict(stream, dict(saved, state={"kind": "IterableState"}))


def test_states_taken_earlier_do_not_change_when_the_iterator_changes_its_own() -> None:
    class InPlace(grainfn.DatasetIterator):
        def __init__(self) -> None:
            super().__init__()
            self.state = {"position": 0}

        def __next__(self) -> int:
            self.state["position"] += 1  # the dict get_state returned, changed in place
            return self.state["position"]

        def get_state(self) -> dict[str, int]:
            return self.state

        def set_state(self, state: dict[str, int]) -> None:
            self.state = dict(state)

    class InPlaceDataset(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return InPlace()

    it = fn.iterate(fn.from_iterable(InPlaceDataset()))
    next(it)
    first = it.state
    next(it)
    assert first == IterableState({"position": 1})
    assert it.state == IterableState({"position": 2})


def test_iterators_without_a_state_of_their_own_are_counted() -> None:
    class Generated:
        def __iter__(self) -> Any:
            yield from "abc"

    class NextOnly(grainfn.DatasetIterator):  # grainfn's base declares get_state; no own state
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __next__(self) -> int:
            self.n += 1
            if self.n > 4:
                raise StopIteration
            return self.n

    class NextOnlyDataset(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return NextOnly()

    for iterable, expected in ((Generated(), list("abc")), (NextOnlyDataset(), [1, 2, 3, 4])):
        it = fn.iterate(fn.from_iterable(iterable))
        next(it)
        assert it.state == IterablePosition(1)
        assert list(fn.iterate(fn.from_iterable(iterable), it.state)) == expected[1:]
    pipeline_iterator = iter(grainfn.MapDataset.range(3).to_iter_dataset())  # grainfn's own
    assert not keeps_own_state(pipeline_iterator)
    assert not keeps_own_state(NextOnly())
    assert keeps_own_state(iter(user_classes(grainfn, [])()))


def test_states_of_either_kind_open_where_they_fit_and_are_refused_where_not() -> None:
    stream = fn.from_iterable(user_classes(grainfn, [5, 6, 7, 8])())
    assert stream.init() == IterablePosition(0)
    # A count (a state grainfn wrote before it kept user states) still restores.
    assert list(fn.iterate(stream, IterablePosition(2))) == [7, 8]
    assert list(fn.iterate(stream, IterableState({"position": 3}))) == [8]
    with pytest.raises(ValueError, match="list_iterator, which has no get_state and set_state"):
        list(fn.iterate(fn.from_iterable([1, 2]), IterableState({"position": 1})))
    with pytest.raises(ValueError, match="expects a IterablePosition"):
        fn.iterate(stream, fn.DatasetPosition(0))


def test_with_workers_the_user_iterator_reads_in_the_parent_and_states_move_between_counts() -> (
    None
):
    ds = user_classes(grainfn, list(range(12)))().map(lambda x: x * 10)
    options = grainfn.MultiprocessingOptions(num_workers=2)
    it = iter(ds.mp_prefetch(options))
    head = [next(it) for _ in range(5)]
    state = it.get_state()
    assert state["state"]["user_state"] == {"position": 5, "source": ["reader"]}
    it.close()
    single = iter(ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=0)))
    single.set_state(state)
    assert head + list(single) == [x * 10 for x in range(12)]


def test_a_thread_prefetched_user_iterator_stops_its_thread_when_dropped() -> None:
    ds = user_classes(grainfn, list(range(10**5)))()
    it = iter(grainfn.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=2))
    next(it)
    assert len(prefetch_threads()) == 1
    del it
    wait_until(lambda: not prefetch_threads(), "the dropped iterator's reader ended")
