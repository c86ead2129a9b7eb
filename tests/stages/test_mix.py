"""mix, concatenate and select_from_datasets: each position read from one of several components."""

from __future__ import annotations

import math

import pytest

from grainfn import fn

from support import conformance
from support.reading import read


def numbers(n: int, start: int = 0) -> fn.Stream:
    return fn.from_dataset(fn.range(start, start + n))


# mix of datasets.


def test_a_dataset_mix_follows_its_weights_and_ends_where_a_component_runs_out() -> None:
    ds = fn.mix([fn.range(4), fn.range(10, 20)], [2, 1])
    assert ds.length == 6
    assert ds.get_many(range(8)) == [0, 1, 10, 2, 3, 11, 0, 1]
    even = fn.mix([fn.range(3), fn.range(10, 12)])
    assert even.length == 4
    assert even.describe_stage() == "mix(weights=[1.0, 1.0])"


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1, -1], "finite and > 0, got -1 at position 1"),
        ([0, 0], "finite and > 0, got 0 at position 0"),
        ([1, math.nan], "finite and > 0, got nan at position 1"),
        ([1, math.inf], "finite and > 0, got inf"),
        ([1], "one entry per dataset: got 1 weights for 2 datasets"),
    ],
)
def test_bad_mixing_weights_are_refused(weights, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fn.mix([fn.range(3), fn.range(3)], weights)


# mix of streams.


def test_a_stream_mix_stops_when_the_component_due_is_exhausted() -> None:
    # Grain's stop rule: a stream mix stops as soon as the component due is exhausted.
    assert list(fn.iterate(fn.mix([numbers(2), fn.from_dataset(fn.range(10, 20))]))) == [
        0,
        10,
        1,
        11,
    ]
    stream = fn.mix([numbers(3), numbers(5, 10)], [1, 2])
    it = fn.iterate(stream)
    assert list(it) == [0, 10, 11, 1, 12, 13, 2, 14]
    assert it.state == fn.MixState(9, True, (fn.DatasetPosition(3), fn.DatasetPosition(5)))


def test_a_mix_state_resumes_from_a_dict() -> None:
    stream = fn.mix([numbers(3), numbers(5, 10)], [1, 2])
    it = fn.iterate(stream)
    assert [next(it) for _ in range(4)] == [0, 10, 11, 1]
    assert it.state == fn.MixState(4, False, (fn.DatasetPosition(2), fn.DatasetPosition(2)))
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == [12, 13, 2, 14]


def test_a_bad_mix_state_is_refused_naming_the_field() -> None:
    stream = fn.mix([numbers(3), numbers(5, 10)])
    start = (fn.DatasetPosition(0), fn.DatasetPosition(0))
    with pytest.raises(ValueError, match="State field position is 9, but at most 0 fits its comp"):
        stream.step(fn.MixState(9, False, start))
    with pytest.raises(ValueError, match="State field stopped must be a bool, got 'no'"):
        stream.step(fn.MixState(0, "no", start))  # type: ignore[arg-type]
    bad = (fn.DatasetPosition(0), fn.DatasetPosition(-1))
    with pytest.raises(ValueError, match=r"State field components\[1\]\.position must be an"):
        stream.step(fn.MixState(0, False, bad))


def test_named_components_take_turns_in_the_order_of_their_names() -> None:
    stream = fn.mix({"b": numbers(8, 100), "a": numbers(8)}, {"a": 1, "b": 3})
    assert stream.describe_stage() == "mix({'a': 1.0, 'b': 3.0})"
    assert list(fn.iterate(stream))[:8] == [0, 100, 101, 102, 1, 103, 104, 105]
    with pytest.raises(ValueError, match="weights must name the same components"):
        fn.mix({"a": numbers(3)}, {"b": 1.0})
    with pytest.raises(TypeError, match="weights may be a dict only when the datasets are a dict"):
        fn.mix([numbers(2)], {"a": 1})
    with pytest.raises(TypeError, match="Named components are for streams"):
        fn.mix({"a": fn.range(2)})


# concatenate.


def test_concatenate_follows_epochs() -> None:
    both = fn.concatenate([fn.range(2), fn.source("ab")])
    assert read(both) == [0, 1, "a", "b"]
    assert both.get_many([4, 7]) == [0, "b"]
    assert both.describe_stage() == "concatenate(2 datasets)"


def test_epoch_e_of_a_concatenation_reads_epoch_e_of_each_component() -> None:
    shuffled = fn.shuffle(fn.range(3), seed=0)
    ds = fn.concatenate([fn.range(2), shuffled])
    epochs = shuffled.get_many(range(3)), shuffled.get_many(range(3, 6))
    assert ds.get_many(range(10)) == [0, 1, *epochs[0], 0, 1, *epochs[1]]


def test_concatenated_lengths_past_int64_are_refused_where_built() -> None:
    huge = fn.batch(2, fn.repeat(None, fn.range(3)))  # 2**62 batches
    with pytest.raises(ValueError, match=r"together they have 9223372036854775808 positions"):
        fn.concatenate([huge, huge])
    assert fn.concatenate([huge, fn.range(3)]).length == huge.length + 3


# select_from_datasets.


def test_select_reads_the_component_and_index_its_map_gives() -> None:
    ds = fn.select_from_datasets([fn.range(3), fn.source("ab")], [(0, 2), (1, 0), (1, 1), (0, 0)])
    assert ds.length == 4
    assert read(ds) == [2, "a", "b", 0]
    assert ds.describe_stage() == "select_from_datasets(list)"


def test_bad_selections_are_refused_naming_the_entry() -> None:
    with pytest.raises(IndexError, match=r"selection_map\[0\] returned \(1, 0\); it must return"):
        fn.select_from_datasets([fn.range(3)], [(1, 0)]).get(0)
    with pytest.raises(TypeError, match=r"returned \(0, 'x'\); it must return a pair of integers"):
        fn.select_from_datasets([fn.range(3)], [(0, "x")]).get(0)
    with pytest.raises(TypeError, match="selection_map must support len"):
        fn.select_from_datasets([fn.range(3)], 5)


test_conforms = conformance.conforms(
    conformance.Example(
        "mix(weights=[2.0, 1.0])", lambda: fn.mix([fn.range(4), fn.range(10, 16)], [2, 1])
    ),
    conformance.Example(
        "mix(weights=[1.0, 2.0])",
        lambda: fn.mix([conformance.numbers(3), conformance.numbers(5, 10)], [1, 2]),
    ),
    conformance.Example(
        "mix({'a': 1.0, 'b': 2.0})",
        lambda: fn.mix({"b": conformance.numbers(4), "a": conformance.numbers(4, 10)}, [2, 1]),
    ),
    conformance.Example(
        "concatenate(2 datasets)", lambda: fn.concatenate([fn.range(3), fn.source("ab")])
    ),
    conformance.Example(
        "select_from_datasets(EveryOther)",
        lambda: fn.select_from_datasets([fn.range(3), fn.source("ab")], conformance.EveryOther(5)),
    ),
)
