"""take_while: a stream's elements up to the first one a predicate refuses.

The stage is its module, one line of grainfn/fn.py and this file: these tests
check that workers, elastic shards, inspection and states take it with nothing
else edited (docs/architecture.md, "Adding a stage").
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.validate import UserStopIterationError
from grainfn._src.stages.take_while import TakeWhileState

from support import conformance


def below(bound: int):
    return _Below(bound)


class _Below:
    def __init__(self, bound: int) -> None:
        self.bound = bound

    def __call__(self, x: int) -> bool:
        return bool(x < self.bound)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Below) and other.bound == self.bound

    def __hash__(self) -> int:
        return hash(self.bound)


def fails(x: int) -> bool:
    if x == 2:
        raise KeyError("no")
    return True


def numbers(n: int) -> fn.Stream:
    return fn.from_dataset(fn.range(n))


def test_it_stops_at_the_first_refused_element_and_reads_nothing_after() -> None:
    stream = fn.take_while(lambda x: x % 5 != 3, numbers(20))
    assert list(fn.iterate(stream)) == [0, 1, 2]
    assert list(fn.iterate(fn.take_while(below(100), numbers(4)))) == [0, 1, 2, 3]
    assert list(fn.iterate(fn.take_while(below(0), numbers(4)))) == []
    seen: list[int] = []
    list(fn.iterate(fn.take_while(lambda x: seen.append(x) or x < 2, numbers(9))))
    assert seen == [0, 1, 2]


def test_a_dataset_is_read_in_order() -> None:
    assert fn.take_while(below(3), fn.range(9)) == fn.take_while(below(3), numbers(9))


def test_a_state_after_the_end_stays_ended_and_crosses_a_dict() -> None:
    stream = fn.take_while(below(3), numbers(10))
    it = fn.iterate(stream)
    assert list(it) == [0, 1, 2]
    assert it.state == TakeWhileState(True, fn.DatasetPosition(4))
    saved = json.loads(json.dumps(fn.state_to_dict(stream, it.state)))
    restored = fn.state_from_dict(stream, saved)
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == []
    middle = fn.state_from_dict(
        stream, fn.state_to_dict(stream, TakeWhileState(False, fn.DatasetPosition(1)))
    )
    assert list(fn.iterate(stream, middle)) == [1, 2]


def test_a_bad_state_is_refused_naming_the_field() -> None:
    stream = fn.take_while(below(3), numbers(10))
    with pytest.raises(ValueError, match="State field stopped must be a bool, got 1"):
        stream.step(TakeWhileState(1, fn.DatasetPosition(0)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"expects a TakeWhileState"):
        stream.step(fn.DatasetPosition(0))


def test_the_predicate_s_errors_name_the_stage_and_ambiguous_verdicts_are_refused() -> None:
    with pytest.raises(KeyError) as caught:
        list(fn.iterate(fn.take_while(fails, numbers(5))))
    assert caught.value.__notes__ == [
        "Raised by the function of take_while(fails), reading the stream element that ends at "
        "state DatasetPosition(position=3)."
    ]
    with pytest.raises(TypeError, match="take_while"):
        list(fn.iterate(fn.take_while(lambda x: np.array([1, 0]), numbers(5))))

    def stops(x: int) -> bool:
        raise StopIteration

    with pytest.raises(UserStopIterationError):
        list(fn.iterate(fn.take_while(stops, numbers(5))))
    with pytest.raises(TypeError, match=r"take_while takes a predicate.*got 3"):
        fn.take_while(3, numbers(5))  # type: ignore[arg-type]


def test_holes_pass_untouched() -> None:
    holes = fn.from_dataset(fn.filter(lambda x: x % 2 == 0, fn.range(8)), allow_nones=True)
    assert list(fn.iterate(fn.take_while(lambda x: x < 5, holes))) == [0, None, 2, None, 4, None]


def test_workers_give_the_same_elements_and_states() -> None:
    stream = fn.take_while(below(30), fn.from_dataset(fn.map(np.square, fn.range(50))))
    expected = list(fn.iterate(stream))
    assert expected == [0, 1, 4, 9, 16, 25]
    assert list(fn.iterate(fn.mp_prefetch(2, stream))) == expected


def test_elastic_shards_cut_the_leaves_beneath_it() -> None:
    stream = fn.take_while(below(15), numbers(20))
    shards = [list(fn.iterate(fn.logical_shard(stream, i, 2))) for i in range(2)]
    assert shards == [[0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13]]


def test_inspection_names_it_times_it_and_infers_its_elements() -> None:
    stream = fn.take_while(below(3), numbers(9))
    assert "take_while(_Below)" in fn.describe_text(stream)
    assert fn.element_spec(stream) == fn.element_spec(stream.parent)
    assert fn.element_spec(stream).shape == ()
    timed = fn.timed(stream)
    assert list(fn.iterate(timed)) == list(fn.iterate(stream))
    assert "take_while(_Below)" in [stats.stage for stats in fn.stage_stats(timed)]


def test_it_pickles() -> None:
    stream = fn.take_while(below(3), numbers(9))
    assert pickle.loads(pickle.dumps(stream)) == stream


test_conforms = conformance.conforms(
    conformance.Example(
        "take_while(below_five)",
        lambda: fn.take_while(conformance.below_five, conformance.numbers(9)),
    ),
)
