"""limit: the first `count` elements of a stream, with a resumable count."""

from __future__ import annotations

import pytest

from grainfn import fn

from support import conformance


def numbers(n: int) -> fn.Stream:
    return fn.from_dataset(fn.range(n))


def test_limit_gives_the_first_count_elements() -> None:
    assert list(fn.iterate(fn.limit(3, numbers(10)))) == [0, 1, 2]
    assert list(fn.iterate(fn.limit(5, numbers(2)))) == [0, 1]
    assert fn.limit(3, numbers(10)).describe_stage() == "limit(3)"


def test_a_state_counts_what_it_passed_on_and_resumes_from_a_dict() -> None:
    stream = fn.limit(4, fn.filter(lambda x: x % 2 == 0, numbers(20)))
    it = fn.iterate(stream)
    assert [next(it), next(it)] == [0, 2]
    assert it.state == fn.LimitState(2, fn.DatasetPosition(3))
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert restored == it.state
    assert list(fn.iterate(stream, restored)) == [4, 6]


def test_a_count_past_the_limit_or_the_parent_is_refused_naming_the_field() -> None:
    stream = fn.limit(3, numbers(10))
    with pytest.raises(ValueError, match=r"State field taken is 5, but at most 3 fits limit\(3\)"):
        stream.step(fn.LimitState(5, fn.DatasetPosition(5)))
    with pytest.raises(ValueError, match="State field taken is 2, but at most 1 fits the parent's"):
        stream.step(fn.LimitState(2, fn.DatasetPosition(1)))
    with pytest.raises(ValueError, match="State field taken must be an integer >= 0, got -1"):
        stream.step(fn.LimitState(-1, fn.DatasetPosition(1)))


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="count must be a positive integer, got 0"):
        fn.limit(0, numbers(10))
    with pytest.raises(TypeError, match=r"count must be a positive integer, got 2\.5"):
        fn.limit(2.5, numbers(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"limit needs a grainfn Stream or Dataset, got \[1, 2\]"):
        fn.limit(3, [1, 2])  # type: ignore[arg-type]


def test_a_dataset_is_limited_as_its_stream() -> None:
    assert fn.limit(2, fn.range(5)) == fn.limit(2, numbers(5))
    assert list(fn.iterate(fn.limit(2, fn.range(5)))) == [0, 1]


test_conforms = conformance.conforms(
    conformance.Example("limit(4)", lambda: fn.limit(4, conformance.numbers(9))),
)
