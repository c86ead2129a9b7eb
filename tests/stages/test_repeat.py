"""repeat: a dataset's epochs one after another, or a stream restarted, with resumable states."""

from __future__ import annotations

import sys

import pytest

from grainfn import fn

from support import conformance
from support.reading import read


def numbers(n: int) -> fn.Stream:
    return fn.from_dataset(fn.range(n))


# Datasets.


def test_repeat_follows_epochs() -> None:
    assert read(fn.repeat(3, fn.range(2))) == [0, 1] * 3
    infinite = fn.repeat(None, fn.range(4))
    assert infinite.length == sys.maxsize
    assert infinite.get(11111) == 11111 % 4
    assert fn.repeat(None, fn.source([])).length == 0


def test_each_repetition_is_a_new_epoch_unless_asked_otherwise() -> None:
    shuffled = fn.shuffle(fn.range(4), seed=1)
    first, second = shuffled.get_many(range(4)), shuffled.get_many(range(4, 8))
    assert first != second
    assert read(fn.repeat(2, shuffled)) == first + second
    same = fn.repeat(2, shuffled, reseed_each_epoch=False)
    assert read(same) == first + first
    assert same.get_many(range(8, 12)) == first
    assert same.describe_stage() == "repeat(2 epochs, same epoch each time)"


def test_finite_lengths_past_int64_are_refused_where_built() -> None:
    huge = fn.batch(2, fn.repeat(None, fn.range(3)))  # 2**62 batches
    with pytest.raises(ValueError, match=r"repeat a dataset of length 4611686018427387904 2 times"):
        fn.repeat(2, huge)
    assert fn.repeat(1, huge).length == huge.length


# Streams.


def test_a_repeated_stream_restarts_its_parent() -> None:
    assert list(fn.iterate(fn.repeat(2, numbers(3)))) == [0, 1, 2, 0, 1, 2]
    assert fn.repeat(2, numbers(3)).describe_stage() == "repeat(2)"
    assert fn.repeat(None, numbers(3)).describe_stage() == "repeat(forever)"


def test_an_endless_repeat_of_an_empty_stream_ends() -> None:
    assert list(fn.iterate(fn.repeat(None, fn.from_dataset(fn.source([]))))) == []


def test_a_state_inside_the_second_epoch_resumes_from_a_dict() -> None:
    stream = fn.repeat(2, numbers(3))
    it = fn.iterate(stream)
    assert [next(it) for _ in range(4)] == [0, 1, 2, 0]
    assert it.state == fn.RepeatState(1, fn.DatasetPosition(1))
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == [1, 2]


def test_an_epoch_past_num_epochs_is_refused_naming_the_field() -> None:
    stream = fn.repeat(2, numbers(3))
    with pytest.raises(ValueError, match=r"State field epoch is 3, but at most 2 fits repeat\(2\)"):
        stream.step(fn.RepeatState(3, fn.DatasetPosition(0)))
    endless = fn.repeat(None, numbers(3))  # any epoch fits
    assert endless.step(fn.RepeatState(30, fn.DatasetPosition(1)))[0] == 1


def test_bad_repeat_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"takes the data last; use repeat\(None, data\)"):
        fn.repeat(fn.range(3), fn.range(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reseed_each_epoch applies to datasets"):
        fn.repeat(2, numbers(2), reseed_each_epoch=False)


test_conforms = conformance.conforms(
    conformance.Example("repeat(3 epochs)", lambda: fn.repeat(3, fn.shuffle(fn.range(4), seed=5))),
    conformance.Example("repeat(forever)", lambda: fn.repeat(None, fn.range(4))),
    conformance.Example("repeat(2)", lambda: fn.repeat(2, conformance.numbers(3))),
    conformance.Example("repeat(forever)", lambda: fn.repeat(None, conformance.numbers(3))),
)
