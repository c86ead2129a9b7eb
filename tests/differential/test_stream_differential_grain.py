"""Differential tests: grainfn streams against Grain 0.2.18's IterDataset.

The same random pipelines, read in order, give the same elements; the state
taken after any element resumes to the same remaining elements.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.grain_states.streams import to_grain
from grainfn._src.testing.specs import INTEGERS, declared_stages, sample_head, sample_op

from support.pipelines import build_grain_stream, build_stream, stream_specs

pytestmark = pytest.mark.grain

MAX_ELEMENTS = 150


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and np.array_equal(a, b)
        )
    return bool(a == b)


def read_grain(spec: tuple[Any, ...]) -> list[Any] | type[Exception]:
    try:
        return list(itertools.islice(iter(build_grain_stream(spec)), MAX_ELEMENTS))
    except (ValueError, TypeError) as error:
        return type(error)


def compare(spec: tuple[Any, ...]) -> None:
    """Grain and grainfn read the same elements of `spec`, or both refuse it."""
    expected = read_grain(spec)
    if isinstance(expected, type):
        with pytest.raises((ValueError, TypeError)):
            list(itertools.islice(fn.iterate(build_stream(spec)), MAX_ELEMENTS))
        return
    stream = build_stream(spec)
    got = list(itertools.islice(fn.iterate(stream), MAX_ELEMENTS))
    assert len(got) == len(expected)
    for position, (ours, theirs) in enumerate(zip(got, expected)):
        assert same(ours, theirs), f"element {position}: {ours!r} != {theirs!r}"


@pytest.mark.slow
@settings(max_examples=200)
@given(stream_specs(grain_only=True))
def test_random_streams_match_grain(spec: tuple[Any, ...]) -> None:
    note(f"spec = {spec!r}")
    compare(spec)


GRAIN_HAS = {stage.name: stage for _, stage in declared_stages("stream") if stage.in_grain}
"""Every declared stream stage and head that Grain has, drawn or not (`in_grain`)."""


@pytest.mark.parametrize("name", sorted(GRAIN_HAS))
@settings(max_examples=5)
@given(data=st.data())
def test_every_declared_stream_stage_grain_has_matches_its_grain_twin(
    name: str, data: st.DataObject
) -> None:
    stage, seeded = GRAIN_HAS[name], ("stream", (("range", 7), ("seed", 1)), False)
    if stage.combines:
        head = data.draw(
            st.composite(lambda draw: sample_head(draw, {name: stage}, st.just((seeded,))))()
        )
        spec: tuple[Any, ...] = (head,)
    else:
        op = data.draw(st.composite(lambda draw: sample_op(draw, {name: stage}, INTEGERS))())
        spec = (seeded, op)
    note(f"spec = {spec!r}")
    compare(spec)


@settings(max_examples=100)
@given(stream_specs(grain_only=True), st.integers(0, 40))
def test_a_state_written_in_grains_format_continues_in_grain(
    spec: tuple[Any, ...], taken: int
) -> None:
    note(f"spec = {spec!r}")
    assume(not isinstance(read_grain(spec), type))  # pipelines Grain itself reads
    stream = build_stream(spec)
    ours = fn.iterate(stream)
    head = list(itertools.islice(ours, taken))
    written = to_grain(stream, ours.state)
    note(f"after {len(head)} elements, Grain's state {written!r}")
    theirs = iter(build_grain_stream(spec))
    theirs.set_state(written)
    rest = list(itertools.islice(theirs, MAX_ELEMENTS))
    expected = list(itertools.islice(ours, MAX_ELEMENTS))
    assert len(rest) == len(expected)
    for position, (a, b) in enumerate(zip(rest, expected)):
        assert same(a, b), f"element {len(head) + position}: Grain {a!r}, grainfn {b!r}"


@pytest.mark.parametrize(
    "spec",
    [
        (
            (
                "stream",
                (("range", 40), ("seed", 2), ("shuffle", None), ("filter", "keep_mostly")),
                False,
            ),
            ("batch", 4, False),
        ),
        (
            ("stream", (("range", 30),), False),
            ("seed", 3),
            ("random_map", "add_draw", None),
            ("map_with_index",),
        ),
        (
            (
                "mix",
                (
                    (("stream", (("range", 10),), False),),
                    (("stream", (("range", 50), ("map", "add_one")), False),),
                ),
                (1.0, 3.0),
            ),
            ("batch", 3, True),
        ),
        (
            ("stream", (("range", 7), ("filter", "keep_even")), True),
            ("random_map", "add_draw", 5),
            ("repeat", 3),
            ("limit", 17),
        ),
    ],
)
def test_known_streams_match_grain(spec: tuple[Any, ...]) -> None:
    expected = read_grain(spec)
    got = list(itertools.islice(fn.iterate(build_stream(spec)), MAX_ELEMENTS))
    assert len(got) == len(expected)
    assert all(same(a, b) for a, b in zip(got, expected))


def test_named_stream_mix_matches_grain() -> None:
    import grain

    theirs = grain.IterDataset.mix(
        {
            "b": grain.MapDataset.range(100, 140).to_iter_dataset(),
            "a": grain.MapDataset.range(20).to_iter_dataset(),
        },
        {"a": 0.25, "b": 0.75},
    )
    ours = fn.mix(
        {"b": fn.from_dataset(fn.range(100, 140)), "a": fn.from_dataset(fn.range(20))},
        {"a": 0.25, "b": 0.75},
    )
    assert list(fn.iterate(ours)) == list(theirs)


def test_stream_filter_passes_none_holes_untouched_unlike_grain() -> None:
    """Grain calls a stream-level predicate with None holes (allow_nones=True), though its
    map and random_map pass them through; grainfn passes them through everywhere."""
    import grain

    holes = grain.MapDataset.range(4).filter(lambda x: x % 2 == 0)
    with pytest.raises(TypeError):
        list(holes.to_iter_dataset(allow_nones=True).filter(lambda x: x + 1 > 0))
    ours = fn.filter(
        lambda x: x + 1 > 0,
        fn.from_dataset(fn.filter(lambda x: x % 2 == 0, fn.range(4)), allow_nones=True),
    )
    assert list(fn.iterate(ours)) == [0, None, 2, None]
