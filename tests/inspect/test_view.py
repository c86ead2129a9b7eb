"""Tests for grainfn._src.inspect.view: the tree of stages inspection walks."""

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.inspect import view as view_module
from grainfn._src.inspect.timing import TimedDataset, timed
from grainfn._src.inspect.view import StageView, view


def noise(x: int, rng: np.random.Generator) -> int:
    return x


def test_view_mirrors_the_pipeline_and_shares_repeated_stages() -> None:
    source = fn.range(3)
    root = view(fn.zip([source, fn.map(str, source)]))
    assert root.label == "zip(2 datasets)"
    left, right = root.parents
    assert right.label == "map(str)"
    assert right.parents[0] is left  # one view per stage, however often it is read
    assert (root.length, left.length, root.counter) == (3, 3, None)


def test_view_folds_timing_stages_into_the_stages_they_time() -> None:
    root = view(timed(fn.map(str, fn.range(3))))
    assert [root.label, root.parents[0].label] == ["map(str)", "range(0, 3, 1)"]
    assert not isinstance(root.stage, TimedDataset)
    assert not isinstance(root.parents[0].stage, TimedDataset)
    assert root.counter is not None and root.parents[0].counter is not None
    assert root.counter is not root.parents[0].counter


def test_stream_stages_have_no_length_and_say_whether_they_are_transparent() -> None:
    stream = view(fn.from_dataset(fn.range(3)))
    assert stream.length is None
    assert not stream.transparent
    assert view(fn.thread_prefetch(2, fn.from_dataset(fn.range(3)))).transparent


def test_as_pipeline_takes_datasets_streams_and_iterators() -> None:
    ds, stream = fn.range(3), fn.from_dataset(fn.range(3))
    assert view_module.as_pipeline(ds, "x") is ds
    assert view_module.as_pipeline(stream, "x") is stream
    assert view_module.as_pipeline(fn.iterate(stream), "x") is stream
    with pytest.raises(TypeError, match=r"draw takes a list, got \[1\] of type list\."):
        view_module.as_pipeline([1], "draw", accepted="a list")
    with pytest.raises(TypeError, match="describe takes a grainfn Dataset, Stream or"):
        view_module.as_pipeline("ds", "describe")


def test_length_text_shows_infinite_lengths_as_inf() -> None:
    assert view_module.length_text(12) == "12"
    assert view_module.length_text(fn.repeat(None, fn.range(2)).length) == "inf"


def test_seed_in_effect_names_the_seed_stages_it_was_derived_from() -> None:
    derived = view(fn.random_map(noise, fn.seed(7, fn.range(3))))
    seed, sources = view_module.seed_in_effect(derived)
    assert seed == derived.stage.seed
    assert sources == ("seed(7)",)
    explicit = view(fn.random_map(noise, fn.seed(7, fn.range(3)), seed=4))
    assert view_module.seed_in_effect(explicit) == (4, ())
    assert view_module.seed_in_effect(view(fn.seed(7, fn.range(3)))) is None
    assert view_module.seed_in_effect(view(fn.range(3))) is None
    assert view(fn.seed(7, fn.range(3))).pipeline_seed == 7


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(12.34, "12.3 s"), (1.5, "1.50 s"), (0.0123, "12.3 ms"), (4.2e-6, "4.20 µs"), (3e-8, "30 ns")],
)
def test_format_seconds_keeps_three_significant_digits(seconds: float, text: str) -> None:
    assert view_module.format_seconds(seconds) == text


def test_stage_views_are_frozen() -> None:
    node = StageView(fn.range(1), ())
    with pytest.raises(AttributeError):
        node.note = "x"  # type: ignore[misc]
