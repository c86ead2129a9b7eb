"""Tests for grainfn._src.inspect.stats: per-stage timing records."""

import pytest

from grainfn import fn
from grainfn._src.inspect import stats
from grainfn._src.inspect.stats import StageStats
from grainfn._src.inspect.timing import Counter, timed
from grainfn._src.inspect.view import StageView


def counter(elements: int, nanoseconds: int, calls: int = 1) -> Counter:
    out = Counter()
    for _ in range(calls):
        out.add(elements, nanoseconds)
    return out


def test_mean_seconds_is_per_element_and_zero_before_the_first() -> None:
    record = StageStats("map(f)", 0, 2, 4, 2.0, 1.0)
    assert record.mean_seconds == 0.5
    assert record._replace(elements=0).mean_seconds == 0.0
    assert (record.note, record.read_here, record.read_elsewhere) == ("", 0, 0)


def test_self_time_is_total_less_the_nearest_timed_parents() -> None:
    source = StageView(fn.range(4), (), counter(4, 1_000))
    middle = StageView(fn.range(4), (source,), counter(4, 3_000), note="threads")
    record = stats.stats_of(middle, depth=2)
    assert record == StageStats("range(0, 4, 1)", 2, 1, 4, 3e-6, 2e-6, "threads", 0, 0)


def test_self_time_is_clamped_at_zero_where_parents_ran_in_other_threads() -> None:
    source = StageView(fn.range(4), (), counter(4, 5_000))
    consumer = StageView(fn.range(4), (source,), counter(4, 1_000))
    assert stats.stats_of(consumer).self_seconds == 0.0


def test_parents_are_counted_once_and_found_through_untimed_transparent_stages() -> None:
    source = StageView(fn.range(4), (), counter(4, 1_000))
    prefetch = fn.thread_prefetch(2, fn.from_dataset(fn.range(4)))
    assert prefetch.transparent
    through = StageView(prefetch, (source,))
    opaque = StageView(fn.from_dataset(fn.range(4)), (source,))
    both = StageView(fn.range(4), (through, source), counter(4, 4_000))
    assert stats.stats_of(both).self_seconds == pytest.approx(3e-6)
    behind_opaque = StageView(fn.range(4), (opaque,), counter(4, 4_000))
    assert stats.stats_of(behind_opaque).self_seconds == pytest.approx(4e-6)


def test_stage_stats_lists_timed_stages_in_describe_order_with_depths() -> None:
    ds = timed(fn.zip([fn.range(3), fn.map(abs, fn.range(3))]))
    ds.get_many(range(3))
    records = stats.stage_stats(ds)
    assert [(r.stage, r.depth, r.elements) for r in records] == [
        ("zip(2 datasets)", 0, 3),
        ("range(0, 3, 1)", 1, 3),
        ("map(abs)", 1, 3),
        ("range(0, 3, 1)", 2, 3),
    ]


def test_stage_stats_refuses_untimed_pipelines_and_other_values() -> None:
    with pytest.raises(ValueError, match=r"not timed\. Time it with grainfn\.fn\.timed"):
        stats.stage_stats(fn.range(3))
    with pytest.raises(TypeError, match=r"stage_stats takes a grainfn Dataset.*got 3 of type int"):
        stats.stage_stats(3)
