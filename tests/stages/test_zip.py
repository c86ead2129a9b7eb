"""zip: equal to Grain's ZipMapDataset and ZipIterDataset, resumable, with clear errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.stages.zip import zip_indices
from grainfn.experimental import ZipIterDataset, ZipMapDataset
from grainfn.testing import assert_elements_equal, assert_resumable

from support import conformance

pytestmark = pytest.mark.grain


def keep_even(x: int) -> bool:
    return x % 2 == 0


def parents(lib: Any, lengths: list[int], seed: int) -> list[Any]:
    """One MapDataset per length: a shuffled range, every other one filtered."""
    out = []
    for i, length in enumerate(lengths):
        ds = lib.MapDataset.range(100 * i, 100 * i + length).shuffle(seed=seed + i)
        out.append(ds.filter(keep_even) if i % 2 else ds)
    return out


@pytest.mark.slow
@settings(max_examples=25)
@given(length=st.integers(1, 20), count=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_zip_map_dataset_matches_grain(length: int, count: int, seed: int) -> None:
    import grain as real

    ours = ZipMapDataset(parents(grain, [length] * count, seed))
    theirs = real.experimental.ZipMapDataset(parents(real, [length] * count, seed))
    assert len(ours) == len(theirs) == length
    positions = range(2 * length)  # two epochs, Nones inside the tuples
    assert_elements_equal([ours[i] for i in positions], [theirs[i] for i in positions])
    options = real.ReadOptions(num_threads=0)
    assert_elements_equal(list(ours), list(theirs.to_iter_dataset(options)))


@settings(max_examples=25)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=3),
    strict=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_zip_iter_dataset_matches_grain(lengths: list[int], strict: bool, seed: int) -> None:
    import grain as real

    def build(lib: Any, make: Any) -> Any:
        streams = [ds.to_iter_dataset() for ds in parents(lib, lengths, seed)]
        streams[0] = parents(lib, lengths, seed)[0]  # a MapDataset parent is read in order
        return make(streams, strict=strict)

    def read(ds: Any) -> Any:
        try:
            return list(ds)
        except ValueError:
            return ValueError

    ours = read(build(grain, ZipIterDataset))
    theirs = read(build(real, real.experimental.ZipIterDataset))
    if theirs is ValueError:
        assert ours is ValueError
    else:
        assert_elements_equal(ours, theirs)


def test_strict_zip_yields_every_full_tuple_before_the_error() -> None:
    for lengths, message in (([2, 3], "goes on after component 0"), ([3, 2], "component 1 ended")):
        stream = fn.zip([fn.from_dataset(fn.range(n)) for n in lengths], strict=True)
        it = fn.iterate(stream)
        assert [next(it), next(it)] == [(0, 0), (1, 1)]
        with pytest.raises(ValueError, match=message):
            next(it)


def test_zip_indices_read_each_epoch_of_each_component() -> None:
    for length, parent_length in ((3, 3), (3, 5), (1, 4), (4, 2**63 - 1)):
        got = zip_indices(np.arange(4 * length), length, parent_length).tolist()
        if parent_length >= 2**63 - 1:
            expected = list(range(4 * length))
        else:
            expected = [e * parent_length + j for e in range(4) for j in range(length)]
        assert got == expected


def test_a_dataset_zip_has_the_shortest_length_and_reads_epoch_by_epoch() -> None:
    a, b = fn.shuffle(fn.range(3), seed=1), fn.shuffle(fn.range(10, 15), seed=2)
    zipped = fn.zip([a, b])
    assert zipped.length == 3
    expected = [(a.get(i), b.get(5 * (i // 3) + i % 3)) for i in range(9)]
    assert zipped.get_many(range(9)) == expected
    assert [zipped.get(i) for i in range(9)] == expected
    infinite = fn.zip([fn.range(2), fn.repeat(None, fn.range(5))])
    assert infinite.get_many([0, 1, 2, 3]) == [(0, 0), (1, 1), (0, 2), (1, 3)]


def zipped_streams() -> Any:
    return fn.zip(
        [
            fn.batch(2, fn.from_dataset(fn.filter(keep_even, fn.range(40)))),
            fn.from_dataset(fn.shuffle(fn.range(15), seed=3)),
        ]
    )


@pytest.mark.parametrize(
    "make",
    [
        zipped_streams,
        lambda: fn.from_dataset(fn.zip([fn.range(12), fn.shuffle(fn.range(20), seed=4)])),
        lambda: fn.zip([fn.from_dataset(fn.range(9)), fn.from_dataset(fn.range(9))], strict=True),
    ],
)
def test_zip_resumes_at_any_element(make: Any) -> None:
    count = len(list(fn.iterate(make())))
    assert_resumable(make, max_elements=count + 1, resume_points=count + 2)


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    with pytest.raises(ValueError, match=r"equal length, got lengths \[3, 4\]"):
        ZipMapDataset([grain.MapDataset.range(3), grain.MapDataset.range(4)])
    with pytest.raises(
        ValueError, match=r"ZipMapDataset takes a non-empty list of datasets, got \[\]"
    ):
        ZipMapDataset([])
    with pytest.raises(TypeError, match="takes a list of datasets"):
        ZipMapDataset({"a": grain.MapDataset.range(3)})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes MapDatasets"):
        ZipMapDataset([grain.MapDataset.range(3).to_iter_dataset()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="IterDatasets or MapDatasets, got 3"):
        ZipIterDataset([3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="with keys \\['a'\\]"):
        fn.zip({"a": fn.range(3)})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="all datasets or all streams"):
        fn.zip([fn.range(3), fn.from_dataset(fn.range(3))])
    with pytest.raises(TypeError, match="item 1 is 'x'"):
        fn.zip([fn.range(3), "x"])
    with pytest.raises(
        ValueError, match=r"zip takes a non-empty list of grainfn datasets or streams"
    ):
        fn.zip([])


def test_describe_stage_names_the_zip() -> None:
    assert fn.zip([fn.range(2), fn.range(3)]).describe_stage() == "zip(2 datasets)"
    streams = [fn.from_dataset(fn.range(2))] * 3
    assert fn.zip(streams).describe_stage() == "zip(3 streams)"
    assert fn.zip(streams, strict=True).describe_stage() == "zip(3 streams, strict=True)"
    assert repr(ZipMapDataset([grain.MapDataset.range(2)] * 2)).splitlines()[1] == (
        "  zip(2 datasets)  [length 2]"
    )


def test_random_stages_after_a_zip_derive_their_seed_as_in_grain() -> None:
    import grain as real

    def build(lib: Any, zip_iter: Any, zip_map: Any) -> list[Any]:
        a = lib.MapDataset.range(6).seed(3)
        b = lib.MapDataset.range(6).seed(5).shuffle()
        shuffled = list(zip_map([a, b]).shuffle())
        streams = zip_iter([a.to_iter_dataset(), b.to_iter_dataset()])
        drawn = list(streams.random_map(lambda t, rng: (t, int(rng.integers(1000)))))
        return [shuffled, drawn]

    experimental = real.experimental
    assert_elements_equal(
        build(grain, ZipIterDataset, ZipMapDataset),
        build(real, experimental.ZipIterDataset, experimental.ZipMapDataset),
    )


test_conforms = conformance.conforms(
    conformance.Example("zip(2 datasets)", lambda: fn.zip([fn.range(4), fn.source("abcd")])),
    conformance.Example(
        "zip(2 streams)",
        lambda: fn.zip([conformance.numbers(4), fn.from_dataset(fn.source("abc"))]),
    ),
)
