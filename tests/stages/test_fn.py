"""The functional core: semantics against Python references, errors, values."""

from __future__ import annotations

import math
import pickle
import sys
from collections import namedtuple

import cloudpickle
import numpy as np
import pytest
import toolz
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn
from grainfn.testing import add_one, build_dataset, dataset_specs


def read(ds: fn.Dataset, count: int | None = None) -> list:
    return ds.get_many(range(ds.length if count is None else count))


# Semantics against Python's own range, slicing and lists.


@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-4, 4).filter(bool))
def test_range_matches_python_range(start: int, stop: int, step: int) -> None:
    ds = fn.range(start, stop, step)
    assert ds.length == len(range(start, stop, step))
    assert read(ds) == list(range(start, stop, step))


@given(st.lists(st.integers(), max_size=20), st.slices(25))
def test_slice_matches_list_slicing(items: list[int], sl: slice) -> None:
    ds = fn.slice(sl, fn.source(items))
    assert read(ds) == items[sl]


@given(st.lists(st.integers(), max_size=40), st.integers(1, 9), st.data())
def test_sequential_parts_split_like_even_split_and_cover_the_data(
    items: list[int], parts: int, data: st.DataObject
) -> None:
    from grainfn._src.loader.sharding import ShardOptions, even_split
    from grainfn._src.stages.slice import sequential_part

    pieces = []
    for part in range(parts):
        ds = sequential_part(
            slice(part, data.draw(st.none() | st.integers()), parts), fn.source(items)
        )
        start, stop = even_split(len(items), ShardOptions(part, parts))
        assert read(ds) == items[start:stop]
        pieces += read(ds)
    assert pieces == items


def test_slice_of_slice_composes_like_lists() -> None:
    items = list(range(30))
    ds = fn.slice(slice(None, None, -2), fn.slice(slice(3, 25, 3), fn.source(items)))
    assert read(ds) == items[3:25:3][::-2]


def test_repeat_and_concatenate_follow_epochs() -> None:
    assert read(fn.repeat(3, fn.range(2))) == [0, 1] * 3
    infinite = fn.repeat(None, fn.range(4))
    assert infinite.length == sys.maxsize
    assert infinite.get(11111) == 11111 % 4
    assert fn.repeat(None, fn.source([])).length == 0
    both = fn.concatenate([fn.range(2), fn.source("ab")])
    assert read(both) == [0, 1, "a", "b"]
    assert both.get_many([4, 7]) == [0, "b"]


@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_shuffle_is_a_new_permutation_each_epoch(n: int, seed: int) -> None:
    ds = fn.shuffle(fn.range(n), seed=seed)
    epochs = [ds.get_many(range(e * n, (e + 1) * n)) for e in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(n))
    if n >= 8:
        assert epochs[0] != epochs[1] or epochs[1] != epochs[2]


def test_filter_leaves_none_and_elements_skips_it() -> None:
    ds = fn.filter(lambda x: x % 3 == 0, fn.range(10))
    assert ds.get_many([0, 1, 3]) == [0, None, 3]
    assert list(fn.elements(ds)) == [0, 3, 6, 9]
    assert list(fn.elements(ds, allow_nones=True))[:3] == [0, None, None]
    assert fn.map(add_one, ds).get(1) is None


def test_map_with_index_sees_the_position_of_every_epoch() -> None:
    ds = fn.map_with_index(lambda i, x: (i, x), fn.source("xy"))
    assert ds.get_many([0, 1, 2, 3]) == [(0, "x"), (1, "y"), (2, "x"), (3, "y")]


def test_random_map_depends_only_on_seed_and_index() -> None:
    draw = fn.random_map(lambda x, rng: (x, rng.integers(2**62)), fn.range(50), seed=11)
    block = draw.get_many(range(50))
    assert [draw.get(i) for i in range(50)] == block
    assert draw.get_many([7, 3]) == [block[7], block[3]]
    assert len({d for _, d in block}) == 50
    assert draw.get(57)[1] != block[7][1]  # a later epoch draws new numbers
    copy = pickle.loads(cloudpickle.dumps(draw))
    assert copy.get_many(range(50)) == block


def test_seed_derives_distinct_reproducible_seeds() -> None:
    seeded = fn.seed(42, fn.range(100))
    first, second = fn.shuffle(seeded), fn.shuffle(fn.shuffle(seeded))
    assert first.seed != second.seed
    assert fn.shuffle(fn.seed(42, fn.range(100))).seed == first.seed
    explicit = fn.shuffle(seeded, seed=5)
    assert explicit.seed == 5


# Batching.


def test_batch_stacks_pytrees_and_batches_each_epoch_separately() -> None:
    point = namedtuple("point", "x y")
    ds = fn.source([{"a": point(i, float(i)), "b": np.full(2, i)} for i in range(5)])
    batches = fn.batch(2, ds)
    assert batches.length == 3
    last = batches.get(2)
    assert isinstance(last["a"], point)
    np.testing.assert_array_equal(last["a"].x, [4])
    np.testing.assert_array_equal(batches.get(3)["b"], [[0, 0], [1, 1]])
    assert fn.batch(2, ds, drop_remainder=True).length == 2
    summed = fn.batch(2, fn.range(5), batch_fn=sum)
    assert read(summed) == [1, 5, 4]


def test_batch_names_the_leaf_whose_shapes_differ() -> None:
    ds = fn.batch(2, fn.source([{"image": np.zeros((2, 2))}, {"image": np.zeros((3, 2))}]))
    with pytest.raises(ValueError, match=r"leaf \['image'\].*\(2, 2\).*\(3, 2\)"):
        ds.get(0)
    ds = fn.batch(2, fn.source([{"a": 1}, {"b": 1}]))
    with pytest.raises(ValueError, match=r"different structure.*keys \['a'\].*keys \['b'\]"):
        ds.get(0)


# Scalar and block paths, currying, values.


@given(dataset_specs(), st.lists(st.integers(0, 200), min_size=1, max_size=30))
def test_scalar_and_block_paths_agree(spec, positions) -> None:
    try:
        ds = build_dataset(spec)
    except (ValueError, TypeError):
        return
    if ds.length == 0:
        return
    try:
        block = ds.get_many(positions)
    except OverflowError:
        return
    except ValueError:  # e.g. ragged batches: some single read must fail the same way
        failures = 0
        for position in positions:
            try:
                ds.get(position)
            except ValueError:
                failures += 1
        assert failures > 0
        return
    for position, element in zip(positions, block):
        single = ds.get(position)
        if isinstance(element, np.ndarray):
            np.testing.assert_array_equal(single, element)
        else:
            assert single == element


def test_curried_forms_compose_with_toolz() -> None:
    piped = toolz.pipe(fn.range(10), fn.seed(1), fn.shuffle(), fn.map(add_one), fn.batch(3))
    direct = fn.batch(3, fn.map(add_one, fn.shuffle(fn.seed(1, fn.range(10)))))
    assert piped == direct
    assert [b.tolist() for b in read(piped)] == [b.tolist() for b in read(direct)]
    assert fn.shuffle(seed=3)(fn.range(4)) == fn.shuffle(fn.range(4), seed=3)


def test_datasets_are_immutable_values_with_readable_repr() -> None:
    ds = fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=3)))
    assert ds == fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=3)))
    assert ds != fn.batch(4, fn.map(add_one, fn.shuffle(fn.range(10), seed=4)))
    with pytest.raises(AttributeError):
        ds.length = 3  # type: ignore[misc]
    assert repr(ds).splitlines() == [
        "batch(4)  [length 3]",
        "  map(add_one)  [length 10]",
        "    shuffle(seed=3)  [length 10]",
        "      range(0, 10, 1)  [length 10]",
    ]
    assert pickle.loads(pickle.dumps(ds)) == ds


def test_elements_reads_any_window_of_positions() -> None:
    ds = fn.range(5)
    assert list(fn.elements(ds, start=3, stop=8)) == [3, 4, 0, 1, 2]
    assert list(fn.elements(ds, stop=0)) == []
    assert list(fn.elements(fn.range(5000))) == list(range(5000))


# Bad input: every message names the value and what is allowed.


@pytest.mark.parametrize("seed", [-1, 2**32, 2**40])
def test_seeds_outside_uint32_are_refused(seed: int) -> None:
    for build in (
        lambda: fn.seed(seed, fn.range(3)),
        lambda: fn.shuffle(fn.range(3), seed=seed),
    ):
        with pytest.raises(ValueError, match=rf"\[0, 2\*\*32\), got {seed}"):
            build()
    with pytest.raises(TypeError, match=r"got 1\.5"):
        fn.shuffle(fn.range(3), seed=1.5)
    # random_map takes any seed >= 0, as Grain does (its generator is keyed by SeedSequence).
    draw = fn.random_map(lambda x, r: x, fn.range(3), seed=abs(seed))
    assert draw.get(1) == 1
    with pytest.raises(ValueError, match=r"an integer >= 0, got -1"):
        fn.random_map(lambda x, r: x, fn.range(3), seed=-1)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1, -1], "finite and > 0, got -1 at position 1"),
        ([0, 0], "finite and > 0, got 0 at position 0"),
        ([1, math.nan], "finite and > 0, got nan at position 1"),
        ([1, math.inf], "finite and > 0, got inf"),
        ([1], "one entry per dataset: got 1 weights for 2 datasets"),
    ],
)
def test_bad_mixing_weights_are_refused(weights, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fn.mix([fn.range(3), fn.range(3)], weights)


def test_bad_arguments_are_refused_with_clear_messages() -> None:
    ds = fn.range(5)
    cases = [
        (lambda: fn.slice(slice(None, None, 0), ds), ValueError, "step must not be 0"),
        (lambda: fn.batch(0, ds), ValueError, "batch_size must be a positive integer, got 0"),
        (lambda: fn.batch(-3, ds), ValueError, "got -3"),
        (lambda: fn.repeat(None, fn.repeat(None, ds)), ValueError, "Cannot repeat an infinite"),
        (lambda: fn.repeat(0, ds), ValueError, "num_epochs must be a positive integer, got 0"),
        (
            lambda: fn.mix([ds, fn.source([])]),
            ValueError,
            "empty dataset: the dataset at position 1",
        ),
        (lambda: fn.map(3, ds), TypeError, "map fn must be callable, got 3"),
        (lambda: fn.filter("x", ds), TypeError, "filter predicate must be callable"),
        (lambda: fn.random_map(None, ds, seed=1), TypeError, "random_map fn must be callable"),
        (lambda: fn.shuffle(ds), ValueError, r"shuffle needs a seed.*fn.seed"),
        (lambda: fn.random_map(add_one, ds), ValueError, "random_map needs a seed"),
        (lambda: fn.batch(2, fn.filter(bool, ds)), ValueError, r"cannot follow filter\(bool\)"),
        (lambda: fn.map(add_one, [1, 2]), TypeError, "expects a grainfn Dataset"),
        (lambda: fn.concatenate([fn.repeat(None, ds)]), ValueError, "infinite dataset"),
        (lambda: fn.range(0, 5, 0), ValueError, "range step must not be 0"),
        (lambda: fn.source(5), TypeError, "must support len"),
        (lambda: fn.slice([9], ds), IndexError, "slice position 9 is out of range"),
        (lambda: fn.mix([]), TypeError, "non-empty sequence of datasets"),
    ]
    for build, error, match in cases:
        with pytest.raises(error, match=match):
            build()


def test_bad_indices_are_refused() -> None:
    with pytest.raises(IndexError, match="index must be >= 0, got -1"):
        fn.range(3).get(-1)
    with pytest.raises(IndexError, match="empty dataset"):
        fn.source([]).get(0)
    with pytest.raises(TypeError, match="index must be an integer"):
        fn.range(3).get(1.0)  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="indices must be >= 0"):
        fn.range(3).get_many([1, -2])
    with pytest.raises(OverflowError, match="past the last addressable position"):
        fn.slice([0], fn.repeat(None, fn.range(3))).get(1)


def test_last_batch_of_an_infinite_dataset_is_short_not_wrapped() -> None:
    batches = fn.batch(2, fn.repeat(None, fn.range(1)))
    assert batches.length == 2**62
    np.testing.assert_array_equal(batches.get(2**62 - 1), [0])
    np.testing.assert_array_equal(batches.get_many([2**62 - 2, 2**62 - 1])[1], [0])


def test_finite_lengths_past_int64_are_refused_where_built() -> None:
    huge = fn.batch(2, fn.repeat(None, fn.range(3)))  # 2**62 batches
    with pytest.raises(ValueError, match=r"repeat a dataset of length 4611686018427387904 2 times"):
        fn.repeat(2, huge)
    with pytest.raises(ValueError, match=r"together they have 9223372036854775808 positions"):
        fn.concatenate([huge, huge])
    assert fn.repeat(1, huge).length == huge.length
    assert fn.concatenate([huge, fn.range(3)]).length == huge.length + 3
