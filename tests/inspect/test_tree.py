"""Tests for grainfn._src.inspect.tree: describe, the pipeline as a tree of stages."""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given

import grainfn as grain
from grainfn import fn, testing
from grainfn._src.core.dataset import pipeline_lines
from grainfn._src.inspect import stats, tree
from grainfn._src.inspect.timing import Counter
from grainfn._src.inspect.view import StageView, view


def noise(x: Any, rng: np.random.Generator) -> Any:
    return x


def test_seeds_derived_from_a_seed_stage_say_so() -> None:
    ds = fn.random_map(noise, fn.shuffle(fn.seed(7, fn.range(6))))
    assert fn.describe_text(ds) == (
        "random_map(noise, seed=1009178997)  [length 6; seed from seed(7)]\n"
        "└─ shuffle(seed=369571992)  [length 6; seed from seed(7)]\n"
        "   └─ seed(7)  [length 6]\n"
        "      └─ range(0, 6, 1)  [length 6]"
    )


def test_explicit_seeds_and_infinite_lengths() -> None:
    stream = fn.batch(
        2, fn.window_shuffle(3, fn.from_dataset(fn.repeat(None, fn.range(4))), seed=5)
    )
    assert fn.describe_text(fn.mp_prefetch(2, stream)) == (
        "mp_prefetch(2)\n"
        "└─ batch(2)\n"
        "   └─ window_shuffle(3, seed=5)\n"
        "      └─ from_dataset()\n"
        "         └─ repeat(forever)  [length inf]\n"
        "            └─ range(0, 4, 1)  [length 4]"
    )


def test_every_branch_of_zip_and_mix_is_shown() -> None:
    named = {"a": fn.from_dataset(fn.range(2)), "b": fn.from_dataset(fn.range(5))}
    stream = fn.zip([fn.from_dataset(fn.range(3)), fn.mix(named, {"a": 1, "b": 3})])
    assert fn.describe_text(stream) == (
        "zip(2 streams)\n"
        "├─ from_dataset()\n"
        "│  └─ range(0, 3, 1)  [length 3]\n"
        "└─ mix({'a': 1.0, 'b': 3.0})\n"
        "   ├─ from_dataset()\n"
        "   │  └─ range(0, 2, 1)  [length 2]\n"
        "   └─ from_dataset()\n"
        "      └─ range(0, 5, 1)  [length 5]"
    )


def test_map_level_mix_with_seeded_components() -> None:
    seeded = fn.seed(1, fn.range(4))
    ds = fn.mix([fn.shuffle(seeded), fn.slice(slice(0, 2), fn.range(9))], [2, 1])
    assert fn.describe_text(ds) == (
        "mix(weights=[2.0, 1.0])  [length 6]\n"
        "├─ shuffle(seed=1189033389)  [length 4; seed from seed(1)]\n"
        "│  └─ seed(1)  [length 4]\n"
        "│     └─ range(0, 4, 1)  [length 4]\n"
        "└─ slice(start=0, stop=2, step=1)  [length 2]\n"
        "   └─ range(0, 9, 1)  [length 9]"
    )


def test_describe_prints_to_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    ds = fn.batch(2, fn.range(3))
    out = io.StringIO()
    grain.describe(ds, file=out)
    assert out.getvalue() == "batch(2)  [length 2]\n└─ range(0, 3, 1)  [length 3]\n"
    fn.describe(ds)
    assert capsys.readouterr().out == out.getvalue()


@given(testing.dataset_specs())
def test_one_line_per_stage_as_in_the_repr(spec: Any) -> None:
    ds = built(spec)
    tree = fn.describe_text(fn.from_dataset(ds)).splitlines()
    plain = pipeline_lines(fn.from_dataset(ds))
    assert len(tree) == len(plain)
    for shown, line in zip(tree, plain):
        stage = re.sub(r"^[│├└─ ]*", "", shown).split("  [")[0]
        assert stage == line.strip().split("  [")[0]
        if "[length" in line:
            assert line.split("  [")[1].replace("]", "") in shown


def built(spec: Any) -> Any:
    """The dataset of a spec (not read: an infinite filtered one could never yield)."""
    try:
        return testing.build_dataset(spec)
    except (ValueError, TypeError, OverflowError):
        assume(False)


def test_bad_input_names_the_value_and_what_is_accepted() -> None:
    with pytest.raises(
        TypeError, match=r"describe takes a grainfn Dataset.*got \[1, 2\] of type list"
    ):
        fn.describe_text([1, 2])
    with pytest.raises(
        TypeError, match=r"describe takes a MapDataset, IterDataset, DatasetIterator, DataLoader.*"
    ):
        grain.describe("abc")
    with pytest.raises(TypeError, match="to_dot takes"):
        grain.to_dot(None)

    class OwnIterator(grain.DatasetIterator[int]):
        def __next__(self) -> int:
            return 1

    with pytest.raises(TypeError, match="defines its own iterator"):
        grain.describe(OwnIterator())


def timed_view(counter: Counter, note: str = "") -> StageView:
    return StageView(fn.range(4), (), counter, note)


def test_timing_text_of_a_stage_not_yet_called() -> None:
    assert tree.timing_text(stats.stats_of(timed_view(Counter()))) == "not called"
    noted = stats.stats_of(timed_view(Counter(), note="in workers"))
    assert tree.timing_text(noted) == "not called (in workers)"


def test_timing_text_shows_calls_elements_times_and_where_elements_were_read() -> None:
    counter = Counter()
    counter.add(4, 2_000_000)
    counter.add_reads(1, 3)
    assert tree.timing_text(stats.stats_of(timed_view(counter))) == (
        "1 calls, 4 elements, total 2.00 ms, self 2.00 ms, 500 µs/element; "
        "1 read here, 3 by the executor"
    )


def test_stage_line_joins_description_facts_and_timing() -> None:
    counter = Counter()
    counter.add(2, 3_000)
    line = tree.stage_line(timed_view(counter))
    assert line == "range(0, 4, 1)  [length 4]  | 1 calls, 2 elements, total 3.00 µs, " + (
        "self 3.00 µs, 1.50 µs/element"
    )


def test_stage_facts_leave_out_a_seed_the_description_already_shows() -> None:
    explicit = view(fn.shuffle(fn.range(3), seed=5))
    assert tree.stage_facts(explicit) == ["length 3"]
    derived = view(fn.shuffle(fn.seed(2, fn.range(3))))
    [length, seed_from] = tree.stage_facts(derived)
    assert (length, seed_from) == ("length 3", "seed from seed(2)")
    assert tree.stage_facts(view(fn.from_dataset(fn.range(3)))) == []
