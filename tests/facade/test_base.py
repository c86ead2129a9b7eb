"""Grain's dataset base module against Grain 0.2.18: the in-place protocols, DatasetOptions.

The in-place protocols: shared-memory batches, a source's `set_slice`. The
options: for the same pipeline, grainfn yields as many elements as Grain before
a filter threshold raises, raises the same exception type, and warns as often.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn

pytestmark = pytest.mark.grain


SHARED_MEMORY_BATCHES = {
    "map-level": lambda g: g.MapDataset.range(10).map(lambda x: {"x": x, "y": [x] * 3}).batch(3),
    "iter-level": lambda g: g.MapDataset.range(10).to_iter_dataset().batch(3, drop_remainder=True),
    "strings": lambda g: (
        g.MapDataset.source(["a", "bb" * 50, "c" * 300]).to_iter_dataset().batch(3)
    ),
    "batch_fn": lambda g: g.MapDataset.range(7).to_iter_dataset().batch(2, batch_fn=list),
    "Batch transform": lambda g: g.MapDataset.range(7).apply(g.transforms.Batch(batch_size=3)),
}


def as_lists(elements: Any) -> list[Any]:
    return [
        {k: np.asarray(v).tolist() for k, v in e.items()}
        if isinstance(e, dict)
        else np.asarray(e).tolist()
        for e in elements
    ]


@pytest.mark.parametrize("case", SHARED_MEMORY_BATCHES)
def test_enable_shared_memory_output_on_a_batch_changes_nothing_like_grain(case: str) -> None:
    import grain

    theirs, ours = SHARED_MEMORY_BATCHES[case](grain), SHARED_MEMORY_BATCHES[case](grainfn)
    before = list(ours)
    assert ours.enable_shared_memory_output() is None
    theirs.enable_shared_memory_output()
    assert as_lists(ours) == as_lists(before) == as_lists(theirs)
    if case == "strings":  # no string is cut short
        assert [len(s) for s in next(iter(ours))] == [1, 100, 300]


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_enable_shared_memory_output_keeps_the_element_spec_like_grain(
    drop_remainder: bool,
) -> None:
    import grain

    specs = []
    for module in (grain, grainfn):
        ds = module.MapDataset.range(10).to_iter_dataset().batch(3, drop_remainder=drop_remainder)
        ds.enable_shared_memory_output()
        spec = module.experimental.get_element_spec(ds)
        specs.append((spec.shape, spec.dtype))
    assert specs[0] == specs[1] == ((3 if drop_remainder else None,), np.int64)


def test_enable_shared_memory_output_then_mp_prefetch_gives_the_same_elements() -> None:
    ds = grainfn.MapDataset.range(12).to_iter_dataset().map(lambda x: np.full(4, x)).batch(5)
    expected = as_lists(ds)
    ds.enable_shared_memory_output()
    prefetched = ds.mp_prefetch(grainfn.multiprocessing.MultiprocessingOptions(num_workers=2))
    assert as_lists(prefetched) == expected


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.MapDataset.range(5),
        lambda g: g.MapDataset.range(5).batch(2).map(lambda x: x),
        lambda g: g.MapDataset.range(5).to_iter_dataset(),
        lambda g: g.MapDataset.range(5).to_iter_dataset().batch(2).filter(lambda x: True),
    ],
)
def test_only_a_batch_has_enable_shared_memory_output_like_grain(make: Any) -> None:
    import grain

    assert not hasattr(make(grain), "enable_shared_memory_output")
    assert not hasattr(make(grainfn), "enable_shared_memory_output")
    with pytest.raises(AttributeError, match="only a batch"):
        make(grainfn).enable_shared_memory_output()


SLICEABLE = {
    "range": lambda g, n: g.MapDataset.range(n),
    "range with start and step": lambda g, n: g.MapDataset.range(3, 3 + 2 * n, 2),
    "source": lambda g, n: g.MapDataset.source([f"r{i}" for i in range(n)]),
}


@pytest.mark.parametrize("kind", SLICEABLE)
def test_set_slice_reads_grains_part(kind: str) -> None:
    import grain

    for length, parts in [(21, 3), (10, 3), (2, 3), (7, 1), (0, 2), (100, 7)]:
        for part in range(parts):
            theirs, ours = SLICEABLE[kind](grain, length), SLICEABLE[kind](grainfn, length)
            sl = slice(part, None if part % 2 else length, parts)  # the stop is ignored
            theirs.set_slice(sl, sequential_slice=True)
            assert ours.set_slice(sl, sequential_slice=True) is None
            assert len(ours) == len(theirs)
            assert list(ours) == list(theirs)
            assert list(ours.to_iter_dataset()) == list(theirs.to_iter_dataset())
            if len(theirs):
                assert [ours[i] for i in range(3 * len(ours))] == [
                    theirs[i] for i in range(3 * len(theirs))
                ]


@settings(max_examples=40)
@given(length=st.integers(0, 300), parts=st.integers(1, 12), data=st.data())
def test_set_slice_of_a_range_equals_grain_hypothesis(length: int, parts: int, data: Any) -> None:
    import grain

    part = data.draw(st.integers(0, parts - 1))
    theirs, ours = grain.MapDataset.range(length), grainfn.MapDataset.range(length)
    theirs.set_slice(slice(part, None, parts), sequential_slice=True)
    ours.set_slice(slice(part, None, parts), sequential_slice=True)
    assert list(ours) == list(theirs)
    # The parts of all workers are the whole dataset, in order.
    pieces = []
    for i in range(parts):
        ds = grainfn.MapDataset.range(length)
        ds.set_slice(slice(i, None, parts), sequential_slice=True)
        pieces += list(ds)
    assert pieces == list(range(length))


@pytest.mark.parametrize("kind", SLICEABLE)
def test_set_slice_refuses_what_grain_refuses(kind: str) -> None:
    import grain

    cases: list[tuple[Any, bool, type[Exception]]] = [
        (slice(0, 1, 1), False, AssertionError),  # Grain's test
        (slice(3, None, 3), True, ValueError),
        (slice(-1, None, 3), True, ValueError),
        (slice(0, None, 0), True, ValueError),
        (slice(0, None, -2), True, ValueError),
        (slice(None, None, 3), True, TypeError),
        (slice(0, None, None), True, TypeError),
    ]
    for sl, sequential, error in cases:
        with pytest.raises(error):
            SLICEABLE[kind](grain, 10).set_slice(sl, sequential_slice=sequential)
        ours = SLICEABLE[kind](grainfn, 10)
        with pytest.raises(error):
            ours.set_slice(sl, sequential_slice=sequential)
        assert len(ours) == 10  # a refused call changes nothing
    with pytest.raises(ValueError, match="only a sequential slice"):  # also a ValueError
        SLICEABLE[kind](grainfn, 10).set_slice(slice(0, 1, 1))


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.MapDataset.range(5).map(lambda x: x),
        lambda g: g.MapDataset.range(5).shuffle(seed=1),
        lambda g: g.MapDataset.range(5)[1:],
        lambda g: g.MapDataset.range(5).to_iter_dataset().map(lambda x: x),
    ],
)
def test_only_a_source_or_a_range_has_set_slice_like_grain(make: Any) -> None:
    import grain

    assert hasattr(grain.MapDataset.range(5), "set_slice")
    assert hasattr(grainfn.MapDataset.range(5), "set_slice")
    assert not hasattr(make(grain), "set_slice")
    assert not hasattr(make(grainfn), "set_slice")
    with pytest.raises(AttributeError, match="set_slice"):
        make(grainfn).set_slice(slice(0, None, 2), sequential_slice=True)
    with pytest.raises(AttributeError, match=r"only a source .* \(this one ends in map\(abs\)\)"):
        grainfn.MapDataset.range(5).map(abs).set_slice(slice(0, None, 2), sequential_slice=True)


def test_set_slice_is_in_place_and_restarts_from_the_whole_source() -> None:
    ds = grainfn.MapDataset.source(list(range(10)))
    earlier = ds.map(lambda x: -x)  # built before: a value, it keeps reading all of it
    ds.set_slice(slice(1, None, 2), sequential_slice=True)
    assert list(ds) == [5, 6, 7, 8, 9]
    assert list(earlier) == [-x for x in range(10)]
    assert list(ds.map(lambda x: -x)) == [-5, -6, -7, -8, -9]
    ds.set_slice(slice(0, None, 5), sequential_slice=True)  # a part of the whole source
    assert list(ds) == [0, 1]
    it = iter(ds.to_iter_dataset())
    assert next(it) == 0
    state = it.get_state()
    assert list(it) == [1]
    it.set_state(state)
    assert list(it) == [1]


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "of the last" in record.getMessage():
            self.messages.append(record.getMessage())


def outcome(
    lib: Any,
    n: int,
    keep: Callable[[int], bool],
    options: list[dict[str, Any]],
    level: str = "iter",
    resume_after: int | None = None,
) -> tuple[str, int, int]:
    """(how reading ended, elements read, warnings logged) for `lib`'s pipeline."""
    handler = Records()
    logging.getLogger().addHandler(handler)
    try:
        if level == "iter":
            ds = lib.MapDataset.range(n).to_iter_dataset().filter(keep)
        else:
            ds = lib.MapDataset.range(n).filter(keep).to_iter_dataset()
        for settings in options:
            opts = lib.experimental.DatasetOptions(**settings)
            ds = lib.experimental.WithOptionsIterDataset(ds, opts)
        read = 0
        try:
            it = iter(ds)
            for _ in it:
                read += 1
                if read == resume_after:
                    state = it.get_state()
                    it = iter(ds)
                    it.set_state(state)
                    read += sum(1 for _ in it)
                    break
        except Exception as error:
            return type(error).__name__, read, len(handler.messages)
        return "end", read, len(handler.messages)
    finally:
        logging.getLogger().removeHandler(handler)


RAISE_90 = [{"filter_raise_threshold_ratio": 0.9}]


CASES = {
    "900 of 1000 dropped raises": (3000, lambda x: x % 1000 < 100, RAISE_90, "iter", None),
    "899 of 1000 dropped does not": (3000, lambda x: x % 1000 < 101, RAISE_90, "iter", None),
    "the window's last element kept": (3000, lambda x: x % 20 == 19, RAISE_90, "iter", None),
    "a shorter last window is not judged": (999, lambda x: x % 20 == 0, RAISE_90, "iter", None),
    "the second window raises": (3000, lambda x: x < 200 or x % 20 == 0, RAISE_90, "iter", None),
    "map-level filter": (3000, lambda x: x % 20 == 19, RAISE_90, "map", None),
    "map-level, below the ratio": (3000, lambda x: x % 2 == 0, RAISE_90, "map", None),
    "default warning, once": (5000, lambda x: x % 20 == 0, [], "iter", None),
    "default warning, map-level": (5000, lambda x: x % 20 == 0, [], "map", None),
    "warning below its ratio": (
        5000,
        lambda x: x % 20 == 0,
        [{"filter_warn_threshold_ratio": 0.96}],
        "iter",
        None,
    ),
    "warning off": (
        5000,
        lambda x: x % 20 == 0,
        [{"filter_warn_threshold_ratio": None}],
        "iter",
        None,
    ),
    "the outer options win": (
        3000,
        lambda x: x % 20 == 0,
        [{"filter_raise_threshold_ratio": 0.99}, {"filter_raise_threshold_ratio": 0.5}],
        "iter",
        None,
    ),
    "the outer options win, the other way": (
        3000,
        lambda x: x % 20 == 0,
        [{"filter_raise_threshold_ratio": 0.5}, {"filter_raise_threshold_ratio": 0.99}],
        "iter",
        None,
    ),
    "a resumed iterator starts a new window": (3000, lambda x: x % 20 == 0, RAISE_90, "iter", 10),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_filter_thresholds_match_grain(case: str) -> None:
    import grain

    n, keep, options, level, resume_after = CASES[case]
    ours = outcome(grainfn, n, keep, options, level, resume_after)
    theirs = outcome(grain, n, keep, options, level, resume_after)
    assert ours[:2] == theirs[:2]  # warnings: how often each logs, see the next tests


@pytest.fixture
def warn_every_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both libraries log every window over the ratio (Grain's own tests set its interval so)."""
    from grain._src.python.dataset.transformations import filter as grain_filter

    from grainfn._src.core import filter_check

    monkeypatch.setattr(grain_filter, "_WARN_FILTERED_INTERVAL_SEC", 0.0)
    monkeypatch.setattr(filter_check, "WARN_INTERVAL", 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_window_warns_as_in_grain(case: str, warn_every_window: None) -> None:
    import grain

    n, keep, options, level, resume_after = CASES[case]
    ours = outcome(grainfn, n, keep, options, level, resume_after)
    theirs = outcome(grain, n, keep, options, level, resume_after)
    assert ours == theirs


@pytest.mark.slow
def test_each_iterator_warns_at_its_first_full_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # Grain's prefetch_test reads a pipeline that drops everything, then expects a warning
    # from the next one; it sets Grain's interval to 0 for that (by default Grain logs at
    # most once a minute per process). grainfn's first warning is per iterator.
    import grain
    from grain._src.python.dataset.transformations import filter as grain_filter

    monkeypatch.setattr(grain_filter, "_WARN_FILTERED_INTERVAL_SEC", 0.0)
    theirs = [outcome(grain, 3000, lambda x: False, [], "map")[2] for _ in range(2)]
    ours = [outcome(grainfn, 3000, lambda x: False, [], "map")[2] for _ in range(2)]
    assert theirs == [3, 3]  # every window
    assert ours == [1, 1]  # once each: the later windows of an iterator wait a minute
    # A resumed iterator keeps its clock: it does not warn again within the minute.
    assert outcome(grainfn, 5000, lambda x: x % 20 == 0, [], "iter", 10)[2] == 1


def test_options_apply_to_filters_added_after_them() -> None:
    import grain

    def build(lib: Any) -> Any:
        ds = lib.MapDataset.range(3000).to_iter_dataset()
        opts = lib.experimental.DatasetOptions(filter_raise_threshold_ratio=0.5)
        return lib.experimental.WithOptionsIterDataset(ds, opts).filter(lambda x: x % 20 == 0)

    for lib in (grain, grainfn):
        with pytest.raises(ValueError):
            list(build(lib))


def test_merge_and_equality_follow_grain() -> None:
    import grain

    def merged(lib: Any) -> tuple[Any, ...]:
        a = lib.experimental.DatasetOptions(filter_warn_threshold_ratio=0.5)
        b = lib.experimental.DatasetOptions(
            filter_warn_threshold_ratio=0.7, filter_raise_threshold_ratio=0.2
        )
        default = lib.experimental.DatasetOptions()
        explicit = lib.experimental.DatasetOptions(filter_warn_threshold_ratio=0.9)
        ab, ba = a.merge(b), b.merge(a)
        return (
            ab.filter_warn_threshold_ratio,
            ab.filter_raise_threshold_ratio,
            ba.filter_warn_threshold_ratio,
            default == lib.experimental.DatasetOptions(),
            default == explicit,
            default.filter_warn_threshold_ratio,
            default.filter_raise_threshold_ratio,
            default.execution_tracking_mode.name,
        )

    assert merged(grainfn) == merged(grain)


def test_bad_ratios_are_refused_naming_the_option() -> None:
    with pytest.raises(
        ValueError, match=r"filter_raise_threshold_ratio must be a ratio in \[0, 1\]"
    ):
        grainfn.experimental.DatasetOptions(filter_raise_threshold_ratio=1.5)
    with pytest.raises(TypeError, match="unknown option 'filter_ratio'"):
        grainfn.experimental.DatasetOptions(filter_ratio=0.5)
