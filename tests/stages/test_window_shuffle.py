"""window_shuffle on streams: Grain's WindowShuffleIterDataset order, resumable from positions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.index.shuffle import shuffle_index
from grainfn._src.stages.window_shuffle import window_order
from grainfn.experimental import WindowShuffleIterDataset
from grainfn.testing import assert_elements_equal, assert_resumable

from support import conformance

pytestmark = pytest.mark.grain


def not_fifths(x: int) -> bool:
    return x % 5 != 0


@settings(max_examples=30)
@given(
    count=st.integers(0, 40),
    window=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 50),
    from_map=st.booleans(),
)
def test_window_shuffle_iter_dataset_matches_grain(
    count: int, window: int, seed: int, from_map: bool
) -> None:
    import grain as real

    def build(lib: Any, make: Any) -> Any:
        ds = lib.MapDataset.range(count)
        parent = ds if from_map else ds.to_iter_dataset().filter(not_fifths)
        return make(parent, window_size=window, seed=seed)

    ours = list(build(grain, WindowShuffleIterDataset))
    theirs = list(build(real, real.experimental.WindowShuffleIterDataset))
    assert_elements_equal(ours, theirs)


def test_window_order_is_grains_permutation_read_backwards() -> None:
    window = list("abcdefg")
    expected = [window[shuffle_index(p, 7, 11)] for p in reversed(range(7))]
    assert window_order(window, 11) == expected


def test_window_seeds_wrap_at_2_to_the_32() -> None:
    # Grain cannot take seed + window >= 2**32; grainfn wraps to (seed + window) % 2**32.
    stream = fn.window_shuffle(3, fn.from_dataset(fn.range(6)), seed=2**32 - 1)
    out = list(fn.iterate(stream))
    assert out[:3] == window_order([0, 1, 2], 2**32 - 1)
    assert out[3:] == window_order([3, 4, 5], 0)


def test_an_unseeded_window_shuffle_takes_the_pipeline_seed() -> None:
    stream = fn.window_shuffle(4, fn.seed(7, fn.from_dataset(fn.range(20))))
    assert sorted(fn.iterate(stream)) == list(range(20))
    with pytest.raises(ValueError, match="window_shuffle needs a seed"):
        fn.window_shuffle(4, fn.from_dataset(fn.range(20)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: fn.window_shuffle(4, fn.from_dataset(fn.filter(not_fifths, fn.range(30))), seed=1),
        lambda: fn.batch(3, fn.window_shuffle(5, fn.from_dataset(fn.range(20)), seed=2)),
        lambda: fn.window_shuffle(6, fn.from_dataset(fn.range(18)), seed=3),
    ],
)
def test_window_shuffle_resumes_at_any_element(make: Any) -> None:
    count = len(list(fn.iterate(make())))
    assert_resumable(make, max_elements=count + 1, resume_points=count + 2)


def test_the_state_holds_the_window_start_and_a_count() -> None:
    stream = fn.window_shuffle(4, fn.from_dataset(fn.range(10)), seed=0)
    it = fn.iterate(stream)
    states = []
    for _ in range(10):
        next(it)
        states.append(it.state)
    assert states[0] == fn.WindowShuffleState(0, 1, fn.DatasetPosition(0))
    assert states[3] == fn.WindowShuffleState(1, 0, fn.DatasetPosition(4))
    assert states[5] == fn.WindowShuffleState(1, 2, fn.DatasetPosition(4))
    assert states[9] == fn.WindowShuffleState(3, 0, fn.DatasetPosition(10))


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    parent = grain.MapDataset.range(5).to_iter_dataset()
    with pytest.raises(ValueError, match="window_size must be a positive integer, got 0"):
        WindowShuffleIterDataset(parent, window_size=0, seed=1)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\), got -1"):
        WindowShuffleIterDataset(parent, window_size=2, seed=-1)
    with pytest.raises(TypeError, match="IterDatasets or MapDatasets, got \\[1, 2\\]"):
        WindowShuffleIterDataset([1, 2], window_size=2, seed=1)  # type: ignore[arg-type]
    stream = fn.window_shuffle(4, fn.from_dataset(fn.range(10)), seed=0)
    with pytest.raises(ValueError, match="emitted is 4, but a window holds at most 4"):
        stream.check_state(fn.WindowShuffleState(0, 4, fn.DatasetPosition(0)))
    with pytest.raises(ValueError, match="2 elements of window 0 were yielded, but the window"):
        fn.iterate(stream, fn.WindowShuffleState(0, 2, fn.DatasetPosition(9)))


def test_describe_stage_names_the_window_shuffle() -> None:
    stream = fn.window_shuffle(4, fn.from_dataset(fn.range(10)), seed=9)
    assert stream.describe_stage() == "window_shuffle(4, seed=9)"


test_conforms = conformance.conforms(
    conformance.Example(
        "window_shuffle(3, seed=1)", lambda: fn.window_shuffle(3, fn.range(7), seed=1)
    ),
    conformance.Example(
        "window_shuffle(3, seed=1)", lambda: fn.window_shuffle(3, conformance.numbers(7), seed=1)
    ),
)
