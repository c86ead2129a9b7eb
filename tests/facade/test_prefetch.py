"""multithread_prefetch and ThreadPrefetchDatasetIterator against Grain 0.2.18.

`ThreadPrefetchDatasetIterator` reads any iterator ahead: a grainfn one
through the core's stream, any other (a user's checkpointable iterator,
Grain's own) by a thread that takes the parent's state after each element.

`multithread_prefetch` cuts a pipeline into one shard per thread (strided at
the MapDataset under `to_iter_dataset`, or, with `sequential_slice`, contiguous
parts of its sources) and interleaves the shards: the order depends on the
number of threads, and must be Grain's for every count.

The read-ahead of an iterator itself (`IteratorReadAhead`) is tested in
tests/stages/test_thread_prefetch.py; ThreadPrefetchIterDataset's Grain test is
there too.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import sys
import threading
from typing import Any

import grain
import pytest
from hypothesis import Phase, find, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import grainfn
from grainfn._src.core.random_stage import RandomStage
from grainfn._src.stages.iterable import keeps_own_state
from grainfn._src.testing.specs import INTEGERS, declared_kinds, sample_op
from grainfn.testing import assert_elements_equal

from support.pipelines import apply_grain, build_grain_stream, stream_specs
from support.scripted import Scripted
from support.waiting import wait_until

pytestmark = pytest.mark.grain

MAX_ELEMENTS = 120


def read(module: Any, spec: tuple[Any, ...], threads: int, sequential: bool) -> Any:
    """The first elements, or the type of the error that building or reading raised."""
    try:
        ds = build_grain_stream(spec, module)
        ds = module.experimental.multithread_prefetch(ds, threads, 3, sequential_slice=sequential)
        with contextlib.closing(iter(ds)) as it:
            return list(itertools.islice(it, MAX_ELEMENTS))
    except (ValueError, TypeError) as error:
        return type(error)


def grain_stage(op: tuple[Any, ...], length: int) -> tuple[Any, list[int]]:
    """Grain's stage of a spec over a seeded source of `length` rows, and the rows' list."""
    rows = list(range(length))
    return apply_grain(op, grain.MapDataset.source(rows).seed(1), grain), rows


def length_follows_the_parent(stage: RandomStage) -> bool:
    """Whether Grain's stage reads its length from its parent when asked, not when built.

    The stage's simplest spec whose length depends on its parent's is built
    over 12 rows; the rows are cut to 6, and its length must be that of the
    stage built over 6. A stage whose length never depends on its parent's
    (positions to take) fixes it when built.
    """

    def depends_on_the_parent(op: tuple[Any, ...]) -> bool:
        return len(grain_stage(op, 12)[0]) != len(grain_stage(op, 6)[0])

    ops = st.composite(lambda draw: sample_op(draw, {stage.name: stage}, INTEGERS))()
    quiet = settings(database=None, phases=[Phase.generate], max_examples=100)
    try:
        op = find(ops, depends_on_the_parent, settings=quiet)
    except NoSuchExample:
        return False
    ds, rows = grain_stage(op, 12)
    del rows[6:]
    return len(ds) == len(grain_stage(op, 6)[0])


ELEMENTWISE = {
    name
    for name, stage in declared_kinds(INTEGERS, "dataset", grain_only=True).items()
    if length_follows_the_parent(stage)
}
"""Map-level stages whose length Grain reads from their parents when asked: every
stage the random pipelines draw, asked of Grain itself."""


def test_the_probe_tells_the_stages_that_read_their_parents_length_when_asked() -> None:
    assert {"map", "filter", "shuffle"} <= ELEMENTWISE
    assert not {"batch", "slice", "repeat", "take"} & ELEMENTWISE


def grain_cuts_sources(spec: tuple[Any, ...]) -> bool:
    """Whether Grain's sequential slicing reads this stream spec correctly.

    Grain cuts the sources in place, after the pipeline was built; stages that
    computed their length from their parents then (batch, mix, concatenate,
    slice, repeat) keep the old one, and read some elements twice or fail.
    """
    head = spec[0]
    if head[0] == "mix":  # a stream-level mix of stream specs
        return all(grain_cuts_sources(part) for part in head[1])
    dataset_head, *ops = head[1]
    return dataset_head[0] == "range" and all(op[0] in ELEMENTWISE for op in ops)


@given(stream_specs(grain_only=True), st.integers(0, 4), st.booleans())
def test_multithread_prefetch_matches_grain(
    spec: tuple[Any, ...], threads: int, sequential: bool
) -> None:
    note(f"spec = {spec!r}, {threads} threads, sequential_slice={sequential}")
    if sequential and threads > 1 and not grain_cuts_sources(spec):
        return  # see test_sequential_parts_of_a_concatenation_hold_each_element_once
    theirs = read(grain, spec, threads, sequential)
    ours = read(grainfn, spec, threads, sequential)
    if isinstance(theirs, type):
        assert isinstance(ours, type), f"Grain raised {theirs.__name__}, grainfn did not"
        return
    assert not isinstance(ours, type), f"grainfn raised {ours}"
    assert_elements_equal(ours, theirs)


def test_sequential_parts_of_a_concatenation_hold_each_element_once() -> None:
    def pipeline(module: Any) -> Any:
        parts = [module.MapDataset.range(3), module.MapDataset.range(10, 14)]
        ds = module.MapDataset.concatenate(parts).to_iter_dataset()
        return module.experimental.multithread_prefetch(ds, 2, 2, sequential_slice=True)

    assert sorted(pipeline(grainfn)) == [0, 1, 2, 10, 11, 12, 13]
    assert sorted(pipeline(grain)) != [0, 1, 2, 10, 11, 12, 13]  # Grain re-reads elements
    batched = grain.MapDataset.range(1).batch(1).to_iter_dataset()
    with pytest.raises(ValueError, match="Cannot batch 0 values"):  # Grain: an empty part
        list(grain.experimental.multithread_prefetch(batched, 2, 3, sequential_slice=True))
    ours = grainfn.MapDataset.range(1).batch(1).to_iter_dataset()
    cut = grainfn.experimental.multithread_prefetch(ours, 2, 3, sequential_slice=True)
    assert [b.tolist() for b in cut] == [[0]]


def test_a_thread_prefetch_iterator_goes_on_where_its_parent_stood() -> None:
    def pipeline(module: Any) -> Any:
        ds = module.MapDataset.range(50).seed(1).shuffle().to_iter_dataset()
        return ds.filter(lambda x: x % 3 != 0)

    outputs = []
    for module in (grain, grainfn):
        parent = iter(pipeline(module))
        head = [next(parent) for _ in range(5)]
        ahead = module.experimental.ThreadPrefetchDatasetIterator(parent, 4)
        rest = [next(ahead) for _ in range(10)]
        ahead.close()
        outputs.append((head, rest))
    assert outputs[0] == outputs[1]


def test_a_thread_prefetch_iterator_keeps_its_parents_states() -> None:
    ds = grainfn.MapDataset.range(40).seed(2).shuffle().to_iter_dataset().map(lambda x: x + 1)
    ahead = grainfn.experimental.ThreadPrefetchDatasetIterator(iter(ds), 8)
    for _ in range(7):
        next(ahead)
    state = ahead.get_state()
    rest = list(ahead)
    plain = iter(ds)
    plain.set_state(state)  # a state of the read-ahead iterator restores without it
    assert list(plain) == rest
    again = grainfn.experimental.ThreadPrefetchDatasetIterator(iter(ds), 2)
    again.set_state(state)
    assert list(again) == rest
    ahead.close()
    again.close()


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "grainfn-thread-prefetch"]


def wait_for_no_prefetch_thread() -> None:
    wait_until(lambda: not prefetch_threads(), "the reader saw its stop flag and ended")


scripts = st.lists(
    st.tuples(st.sampled_from(["value"] * 6 + ["error", "end"]), st.integers(0, 99)), max_size=25
)
actions = st.lists(st.sampled_from(["next"] * 8 + ["save", "restore", "state"]), max_size=40)


def trace(module: Any, script: list[tuple[str, int]], size: int, steps: list[str]) -> list[Any]:
    """What each step gave: an element or an error, and the state after it."""
    parent = Scripted(script)
    it = module.experimental.ThreadPrefetchDatasetIterator(parent, size)
    out: list[Any] = []
    saved = it.get_state()
    for step in steps:
        if step == "save":
            saved = it.get_state()
        elif step == "restore":
            it.set_state(saved)
        elif step == "next":
            try:
                out.append(next(it))
            except (OSError, StopIteration) as error:
                out.append((type(error).__name__, str(error)))
        out.append(it.get_state())
    it.close()
    return out


@settings(deadline=None)
@given(scripts, st.integers(0, 4), actions)
def test_any_checkpointable_iterator_is_read_ahead_as_in_grain(
    script: list[tuple[str, int]], size: int, steps: list[str]
) -> None:
    """Elements, errors at their place, reading on after them, states and restores: Grain's."""
    note(f"script = {script!r}, prefetch_buffer_size={size}, steps = {steps!r}")
    assert trace(grainfn, script, size, steps) == trace(grain, script, size, steps)
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_grains_own_test_of_a_nonnative_iterator() -> None:
    """Grain's prefetch_test `test_nonnative_iterator`, and the states on the way."""
    script = [("value", v) for v in range(1, 11)]
    parent = Scripted(script)
    it = grainfn.experimental.ThreadPrefetchDatasetIterator(parent, 10)
    elements = [next(it) for _ in range(5)]
    checkpoint = it.get_state()
    assert checkpoint == {"position": 5}  # the parent's own state, after the 5th element
    wait_until(lambda: parent.position == len(script), "the thread read the rest ahead")
    assert it.get_state() == checkpoint  # the state does not move
    elements.extend(it)
    assert elements == list(range(1, 11))
    it.set_state(checkpoint)
    assert list(it) == elements[5:]
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_grains_iterators_and_read_ahead_iterators_are_read_ahead_too() -> None:
    theirs = iter(grain.MapDataset.range(30).seed(3).shuffle().to_iter_dataset())
    expected = list(grain.MapDataset.range(30).seed(3).shuffle())
    ahead = grainfn.experimental.ThreadPrefetchDatasetIterator(theirs, 4)
    twice = grainfn.experimental.ThreadPrefetchDatasetIterator(ahead, 2)
    head = [next(twice) for _ in range(10)]
    state = twice.get_state()
    assert state == {"next_index": 10}  # Grain's iterator's own state
    assert head + list(twice) == expected
    twice.set_state(state)
    assert list(twice) == expected[10:]
    twice.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_an_iterator_without_get_state_is_read_ahead_and_its_state_is_refused() -> None:
    caught: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, caught.append
    try:
        with pytest.raises(AttributeError, match="get_state"):  # Grain refuses it at once
            grain.experimental.ThreadPrefetchDatasetIterator(iter([1, 2, 3]), 2)
        gc.collect()  # the half-built iterator fails again in its __del__
    finally:
        sys.unraisablehook = hook
    it = grainfn.experimental.ThreadPrefetchDatasetIterator(iter([1, 2, 3]), 2)
    assert next(it) == 1
    with pytest.raises(TypeError, match="its parent, a list_iterator, has no get_state"):
        it.get_state()
    with pytest.raises(TypeError, match="its parent, a list_iterator, has no set_state"):
        it.set_state({"position": 0})
    assert list(it) == [2, 3]  # nothing lost to the refusals
    it.close()
    wait_until(lambda: not prefetch_threads(), "every prefetch thread ended")


def test_an_iterator_dropped_without_closing_stops_its_thread() -> None:
    parent = Scripted([("value", v) for v in range(10**5)])
    it = grainfn.experimental.ThreadPrefetchDatasetIterator(parent, 2)
    next(it)
    assert len(prefetch_threads()) == 1
    del it
    wait_for_no_prefetch_thread()
    assert parent.position < 10  # the thread stopped reading, not ran to the end


def test_a_list_or_a_negative_buffer_is_refused() -> None:
    with pytest.raises(TypeError, match="ThreadPrefetchIterDataset"):
        grainfn.experimental.ThreadPrefetchDatasetIterator([1, 2], 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefetch_buffer_size"):
        grainfn.experimental.ThreadPrefetchDatasetIterator(
            iter(grainfn.MapDataset.range(3).to_iter_dataset()), -1
        )


def test_either_parent_gives_a_thread_prefetch_iterator_whose_state_is_its_own() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def __next__(self) -> int:
            self.n += 1
            return self.n

        def get_state(self) -> dict[str, int]:
            return {"n": self.n}

        def set_state(self, state: dict[str, int]) -> None:
            self.n = state["n"]

    ahead = grainfn.experimental.ThreadPrefetchDatasetIterator
    pipeline = ahead(iter(grainfn.MapDataset.range(5).to_iter_dataset()), 2)
    other = ahead(Counter(), 2)
    for it in (pipeline, other):
        assert isinstance(it, ahead) and isinstance(it, grainfn.DatasetIterator)
        assert keeps_own_state(it)  # a dataset whose __iter__ returns it restores from it
    assert pipeline.core.state is not None
    with pytest.raises(AttributeError, match=r"reads a .*\.Counter, not a grainfn pipeline"):
        other.core  # noqa: B018
    assert repr(other).startswith("ThreadPrefetchDatasetIterator(prefetch_buffer_size=2) over a")
    assert repr(other).endswith(".Counter")
    pipeline.close()
    other.close()
