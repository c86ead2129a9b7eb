"""Packing state: resuming at any element, Grain-style get_state/set_state, and workers.

The state of a packing stage is the parent's state before the current block
and two counters; resuming reads the block again and packs it again. These
tests resume at every element (states through JSON), restore facade
iterators, and run the stage behind `mp_prefetch` with 0, 1 and 2 workers.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.facade.packing import BestFitPackIterDataset, FirstFitPackIterDataset
from grainfn._src.packing import PackState, best_fit_pack, first_fit_pack
from grainfn._src.packing.arrays import Memory
from grainfn.testing import assert_elements_equal, assert_resumable

from support.facade_resuming import assert_get_state_resumes, assert_same_under_workers

LENGTHS = {"inputs": 12, "targets": 10}


def document(index: int) -> dict[str, Any]:
    """A deterministic document of 1 to 12 input and 1 to 10 target tokens."""
    inputs = np.arange(1 + (index * 7919) % 12, dtype=np.int32) + 100 * index
    targets = np.arange(1 + (index * 104729) % 10, dtype=np.int64)
    return {"inputs": inputs, "targets": targets, "id": index}


def packed_stream(strategy: str, count: int, **options: Any) -> Any:
    combinator = first_fit_pack if strategy == "first_fit" else best_fit_pack
    parent = fn.from_dataset(fn.map(document, fn.filter(lambda i: i % 5 != 3, fn.range(count))))
    return combinator(LENGTHS, parent, **options)


def rows(stream: Any) -> int:
    return sum(1 for _ in fn.iterate(stream))


@pytest.mark.parametrize("strategy", ["first_fit", "best_fit"])
@pytest.mark.parametrize(
    "options",
    [
        {"num_packing_bins": 3},
        {"num_packing_bins": 4, "seed": 7, "meta_features": ["id"]},
        {"num_packing_bins": 2, "shuffle_bins": False, "max_sequences_per_bin": 2},
        {"num_packing_bins": 5, "shuffle_bins_group_by_feature": "inputs_segment_ids"},
    ],
)
def test_resuming_after_any_element_gives_the_same_rest(
    strategy: str, options: dict[str, Any]
) -> None:
    make = lambda: packed_stream(strategy, 60, **options)  # noqa: E731
    n = rows(make())
    assert n > 10
    assert_resumable(make, max_elements=n, resume_points=n + 1)


@settings(max_examples=25)
@given(
    count=st.integers(0, 40),
    bins=st.integers(1, 5),
    seed=st.integers(0, 99),
    strategy=st.sampled_from(["first_fit", "best_fit"]),
    repeat=st.booleans(),
)
def test_random_pipelines_resume_anywhere(
    count: int, bins: int, seed: int, strategy: str, repeat: bool
) -> None:
    def make() -> Any:
        stream = packed_stream(strategy, count, num_packing_bins=bins, seed=seed)
        return fn.repeat(2, stream) if repeat else stream

    n = rows(make())
    assert_resumable(make, max_elements=n, resume_points=n + 1)


def test_the_state_holds_positions_and_counters_only() -> None:
    stream = packed_stream("first_fit", 60, num_packing_bins=3)
    it = fn.iterate(stream)
    assert it.state == PackState(0, 0, fn.DatasetPosition(0))
    for _ in range(5):
        next(it)
    state = it.state
    assert isinstance(state, PackState)
    assert state.emitted == 5
    assert state.row < 3
    assert isinstance(state.parent, fn.DatasetPosition)
    saved = fn.state_to_dict(stream, state)
    assert json.loads(json.dumps(saved)) == saved
    assert saved["pipeline"][0] == "first_fit_pack({'inputs': 12, 'targets': 10}, " + (
        "num_packing_bins=3, seed=0)"
    )


def test_a_state_that_does_not_fit_the_block_is_refused() -> None:
    stream = packed_stream("first_fit", 60, num_packing_bins=3)
    with pytest.raises(ValueError, match=r"The state says 7 rows of the current block were"):
        next(fn.iterate(stream, PackState(7, 7, fn.DatasetPosition(0))))
    with pytest.raises(ValueError, match=r"State field row is 4, more than the 2 rows"):
        fn.iterate(stream, PackState(4, 2, fn.DatasetPosition(0)))
    with pytest.raises(ValueError, match=r"expects a PackState"):
        fn.iterate(stream, fn.DatasetPosition(0))


def facade(cls: Any, count: int = 60, **options: Any) -> Any:
    ds = grain.MapDataset.range(count).filter(lambda i: i % 5 != 3).map(document)
    return cls(ds.to_iter_dataset(), length_struct=LENGTHS, **options)


@pytest.mark.parametrize("cls", [FirstFitPackIterDataset, BestFitPackIterDataset])
def test_get_state_and_set_state_restore_the_iterator(cls: Any) -> None:
    def make() -> Any:
        return facade(cls, num_packing_bins=4, seed=3, meta_features=["id"])

    count = len(list(make()))
    assert_get_state_resumes(make, (0, 1, 5, count - 1, count))
    saved = iter(make()).get_state()
    other = iter(facade(cls, num_packing_bins=5, seed=3, meta_features=["id"]))
    with pytest.raises(ValueError, match="State belongs to another pipeline"):
        other.set_state(saved)


def test_the_output_and_the_states_do_not_depend_on_the_worker_count() -> None:
    def make() -> Any:
        return facade(FirstFitPackIterDataset, 80, num_packing_bins=4, seed=1).batch(2)

    assert_same_under_workers(make)


def test_rows_kept_by_the_consumer_are_never_overwritten() -> None:
    docs = [{"x": np.full(1 + i % 5, i, np.int32)} for i in range(300)]
    stream = first_fit_pack({"x": 8}, fn.source(docs), num_packing_bins=2, seed=5)
    copies, kept, views, memories = [], [], [], []
    for i, row in enumerate(fn.iterate(stream)):
        copies.append({key: np.array(value) for key, value in row.items()})
        if i % 7 == 0:
            kept.append((i, row))
        elif i % 7 == 1:
            views.append((i, row["x"][1:]))  # only a view of a view outlives the row
        elif i % 7 == 2:
            memories.append((i, memoryview(row["x_positions"])))
    assert len(copies) > 100
    for i, row in kept:
        assert_elements_equal(row, copies[i], f"kept row {i}")
    for i, view in views:
        assert_elements_equal(view, copies[i]["x"][1:], f"view of row {i}")
    for i, memory in memories:
        assert_elements_equal(np.asarray(memory), copies[i]["x_positions"], f"memoryview {i}")


def test_a_buffer_is_reused_once_no_array_of_it_is_left() -> None:
    memory = Memory()
    first = memory.take(64)
    address = first.__array_interface__["data"][0]
    rows = first.view(np.int32).reshape(4, 4)[1:]
    del first
    assert memory.take(64).__array_interface__["data"][0] != address  # `rows` holds it
    del rows
    assert memory.take(64).__array_interface__["data"][0] == address
    assert memory.take(32).nbytes == 32  # another size: a new buffer
