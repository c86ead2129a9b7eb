"""DatasetOptions and WithOptionsIterDataset: the filter thresholds, against Grain 0.2.18.

For the same pipeline, grainfn yields as many elements as Grain before a filter
threshold raises, raises the same exception type, and warns as often.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

import grainfn

pytestmark = pytest.mark.grain


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


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_window_warns_as_in_grain(case: str, warn_every_window: None) -> None:
    import grain

    n, keep, options, level, resume_after = CASES[case]
    ours = outcome(grainfn, n, keep, options, level, resume_after)
    theirs = outcome(grain, n, keep, options, level, resume_after)
    assert ours == theirs


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
