"""Nested features in first-fit and best-fit packing: equal to Grain 0.2.18, leaf by leaf.

A top-level feature of `length_struct` may be a tree (dicts, lists, tuples of
ints). As a meta feature, Grain packs each leaf on its own and grainfn must
yield exactly Grain's elements. Not a meta feature, Grain refuses it and
grainfn packs it with trees of segment ids and positions: the same as
packing every leaf as a flat feature of its own, which Grain does, so that
case is checked against Grain too, through a flattened copy of the input.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packing.test_stream import STRATEGIES, assert_all_equal, grain_packed, ours

import grainfn as grain
from grainfn import fn
from grainfn._src.packing import best_fit_pack, first_fit_pack
from grainfn._src.packing.bins import Block
from grainfn._src.packing.spec import pack_spec
from grainfn._src.packing.trees import leaf_paths, rebuild
from grainfn.testing import assert_resumable

from support.facade_resuming import assert_get_state_resumes, assert_same_under_workers

pytestmark = pytest.mark.grain


class Span(NamedTuple):
    start: Any
    end: Any


def key_order(tree: Any) -> list[Any]:
    """The keys of every dict in `tree`, in the order they come, depth first."""
    if isinstance(tree, dict):
        return [list(tree), *(k for value in tree.values() for k in key_order(value))]
    if isinstance(tree, (list, tuple)):
        return [k for value in tree for k in key_order(value)]
    return []


def assert_as_grain(strategy: str, elements: Sequence[Any], **options: Any) -> list[Any]:
    """grainfn's packed elements (core and facade) equal Grain's, dict keys in the same order."""
    expected = grain_packed(strategy, elements, **options)
    packed = ours(strategy, elements, **options)
    assert_all_equal(packed, expected)
    assert [key_order(row) for row in packed] == [key_order(row) for row in expected]
    return packed


def flattened(options: dict[str, Any], elements: Sequence[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The options and elements with every nested feature `f` split into flat features `f.i`."""
    length_struct = options["length_struct"]
    nested = [f for f, value in length_struct.items() if isinstance(value, (dict, list, tuple))]

    def flat(struct: Any) -> Any:
        out = dict(struct)
        for name in nested:
            leaves = leaf_paths(out.pop(name))
            out.update({f"{name}.{i}": leaf for i, (_, leaf) in enumerate(leaves)})
        return out

    flat_options = {**options}
    for key in ("length_struct", "pack_alignment_struct", "padding_struct"):
        if options.get(key) is not None:
            flat_options[key] = flat(options[key])
    metas = list(options.get("meta_features", ()))
    for name in nested:
        if name in metas:
            metas.remove(name)
            metas += [f"{name}.{i}" for i in range(len(leaf_paths(length_struct[name])))]
    flat_options["meta_features"] = metas
    return flat_options, [flat(element) for element in elements]


def assert_as_grain_leaf_by_leaf(strategy: str, elements: Sequence[Any], **options: Any) -> None:
    """grainfn's packed elements equal Grain's of the flattened input, leaves put back in trees."""
    flat_options, flat_elements = flattened(options, elements)
    theirs = grain_packed(strategy, flat_elements, **flat_options)
    packed = ours(strategy, elements, **options)
    metas = options.get("meta_features", ())
    expected = []
    for row in theirs:
        out = dict(row)
        for name, tree in options["length_struct"].items():
            if not isinstance(tree, (dict, list, tuple)):
                continue
            count = len(leaf_paths(tree))
            for suffix in ("", *(() if name in metas else ("_segment_ids", "_positions"))):
                leaves = [out.pop(f"{name}.{i}{suffix}") for i in range(count)]
                out[name + suffix] = rebuild(tree, iter(leaves))
        expected.append({key: out[key] for key in sorted(out)})
    assert_all_equal(packed, expected)
    assert [key_order(row) for row in packed] == [key_order(row) for row in expected]


def in_order(shape: Any, leaves: Iterator[Any]) -> Any:
    """`shape` with its leaves from `leaves`, dicts keeping their own key order (as users write)."""
    if isinstance(shape, dict):
        return {key: in_order(value, leaves) for key, value in shape.items()}
    if isinstance(shape, (list, tuple)):
        return type(shape)(in_order(value, leaves) for value in shape)
    return next(leaves)


def pairs(lengths: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """Elements with a nested feature "a" of two leaves, a flat "b" and an id."""
    return [
        {"a": {"y": np.arange(n) + 10 * i, "x": -np.arange(n) - i}, "b": np.arange(m), "id": i}
        for i, (n, m) in enumerate(lengths)
    ]


def test_the_leaves_of_a_nested_meta_feature_are_packed_each_on_its_own_as_in_grain() -> None:
    elements = pairs([(3, 2), (2, 4), (4, 1), (1, 1)])
    options = {"length_struct": {"a": {"y": 5, "x": 5}, "b": 4}, "num_packing_bins": 2}
    for strategy in STRATEGIES:
        packed = assert_as_grain(
            strategy, elements, **options, meta_features=("a",), shuffle_bins=False
        )
        assert list(packed[0]) == ["a", "b", "b_positions", "b_segment_ids"]
        assert list(packed[0]["a"]) == ["x", "y"]
        assert packed[0]["a"]["y"].tolist() == [0, 1, 2, 0, 0]
        assert packed[0]["a"]["x"].tolist() == [0, -1, -2, 0, 0]
        assert_as_grain(strategy, elements * 5, **options, meta_features=["a", "id"], seed=4)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nested_meta_features_pack_as_in_grain_with_every_option(strategy: str) -> None:
    rng = np.random.default_rng(11)
    elements = []
    for i in range(150):
        n, m, k = rng.integers(1, 7), rng.integers(0, 5), rng.integers(0, 3)
        elements.append(
            {
                "inputs": rng.integers(1, 9, size=rng.integers(1, 9)).astype(np.int32),
                "media": {
                    "frames": rng.normal(size=(n, 2)).astype(np.float32),
                    "spans": Span(np.arange(m), np.arange(m) + 1),
                    "tags": [np.full(k, i, np.int16), i % 3],
                },
                "task": i % 4,
                "unused": "dropped",
            }
        )
    media = {"tags": [3, 1], "frames": 6, "spans": Span(4, 4)}
    options: dict[str, Any] = {
        "length_struct": {"inputs": 10, "media": media},
        "num_packing_bins": 4,
        "meta_features": ["media", "task"],
    }
    assert_as_grain(strategy, elements, **options)
    packed = assert_as_grain(
        strategy,
        elements,
        **options,
        seed=77,
        shuffle_bins_group_by_feature="task",
        pack_alignment_struct={
            "inputs": 2,
            "media": {"frames": 3, "spans": Span(1, 2), "tags": [2, 1]},
        },
        padding_struct={
            "inputs": -1,
            "media": {"frames": 0.5, "spans": Span(None, -3), "tags": [7, None]},
        },
        max_sequences_per_bin=3,
    )
    assert isinstance(packed[0]["media"]["spans"], Span)
    assert isinstance(packed[0]["media"]["tags"], list)
    assert_as_grain(
        strategy, elements, **options, shuffle_bins_group_by_feature="inputs_segment_ids"
    )


def test_other_keys_in_an_elements_nested_dict_are_dropped_as_in_grain() -> None:
    elements = [{"a": {"x": np.arange(n), "note": "?"}, "b": np.arange(1)} for n in (1, 3, 2)]
    for strategy in STRATEGIES:
        packed = assert_as_grain(
            strategy, elements, length_struct={"a": {"x": 4}, "b": 2}, num_packing_bins=2,
            meta_features=["a"],
        )  # fmt: skip
        assert all(list(row["a"]) == ["x"] for row in packed)


def test_a_nested_feature_that_is_not_meta_gets_trees_of_segment_ids_and_positions() -> None:
    # Grain refuses it; grainfn packs it as if each leaf were a feature of its own.
    elements = pairs([(3, 2), (2, 4), (1, 1)])
    options = {"length_struct": {"a": {"x": 5, "y": 5}, "b": 4}, "num_packing_bins": 2}
    with pytest.raises(ValueError, match="Failed to extract segment ids for 'a'"):
        grain_packed("first_fit", elements, **options)
    (row, *_) = ours("first_fit", elements, **options, shuffle_bins=False)
    assert list(row) == [
        "a", "a_positions", "a_segment_ids", "b", "b_positions", "b_segment_ids",
    ]  # fmt: skip
    assert row["a"]["x"].tolist() == [0, -1, -2, -2, 0]
    assert list(row["a_segment_ids"]) == list(row["a_positions"]) == ["x", "y"]
    assert row["a_segment_ids"]["x"].tolist() == [1, 1, 1, 2, 0]
    assert row["a_positions"]["y"].tolist() == [0, 1, 2, 0, 0]
    assert row["a_positions"]["y"].dtype == np.int32
    for strategy in STRATEGIES:
        assert_as_grain_leaf_by_leaf(strategy, elements * 9, **options, seed=3)


@st.composite
def nested_cases(draw: Any) -> tuple[str, list[Any], dict[str, Any]]:
    """A strategy, elements with a random tree feature "a", a flat "b" and an id, and options."""
    containers = lambda children: st.one_of(  # noqa: E731
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from("zyxw"), children, min_size=1, max_size=3),
    )
    shape = draw(containers(st.recursive(st.just(0), containers, max_leaves=3)))
    count = len(leaf_paths(shape))
    caps = [draw(st.integers(1, 6)) for _ in range(count)]
    kinds = [draw(st.sampled_from(["int32", "int64", "float32", "pairs", "scalar"])) for _ in caps]
    strategy = draw(st.sampled_from(STRATEGIES))
    limit = draw(st.one_of(st.none(), st.integers(1, 3)))
    shortest = 1 if strategy == "best_fit" and limit is not None else 0  # see test_pack.py
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    elements = []
    for i in range(draw(st.integers(0, 25))):
        leaves: list[Any] = []
        for cap, kind in zip(caps, kinds):
            n = int(rng.integers(0, cap + 1))
            if kind == "scalar":
                leaves.append(int(rng.integers(0, 9)))
            elif kind == "pairs":
                leaves.append(rng.normal(size=(n, 2)))
            else:
                leaves.append(rng.integers(0, 9, size=n).astype(kind))
        b = rng.integers(1, 9, size=int(rng.integers(shortest, 5)))
        elements.append({"a": in_order(shape, iter(leaves)), "b": b, "id": i, "other": 0})
    options: dict[str, Any] = {
        "length_struct": {"a": in_order(shape, iter(caps)), "b": 4},
        "num_packing_bins": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 10_000)),
        "shuffle_bins": draw(st.booleans()),
        "meta_features": ["id", *(["a"] if draw(st.booleans()) else [])],
    }
    if limit is not None:
        options["max_sequences_per_bin"] = limit
    if draw(st.booleans()):
        aligned = [draw(st.integers(1, 3)) for _ in caps]
        options["pack_alignment_struct"] = {"a": in_order(shape, iter(aligned)), "b": 2}
    if draw(st.booleans()):
        padded = [draw(st.one_of(st.none(), st.integers(-1, 5))) for _ in caps]
        options["padding_struct"] = {"a": in_order(shape, iter(padded)), "b": -1}
    if options["shuffle_bins"] and draw(st.booleans()):
        options["shuffle_bins_group_by_feature"] = draw(st.sampled_from(["b_segment_ids", "id"]))
    return strategy, elements, options


@settings(max_examples=60)
@given(nested_cases())
def test_random_nested_structures_pack_as_in_grain(
    case: tuple[str, list[Any], dict[str, Any]],
) -> None:
    strategy, elements, options = case
    if "a" in options["meta_features"]:
        assert_as_grain(strategy, elements, **options)
    assert_as_grain_leaf_by_leaf(strategy, elements, **options)


# State, description and workers.


def document(index: int) -> dict[str, Any]:
    """A deterministic element with a nested feature of a list of two and a scalar."""
    return {
        "turns": {
            "text": [np.arange(1 + index % 5) + index, np.arange(index % 3)],
            "speaker": index % 2,
        },
        "tokens": np.arange(1 + (index * 7) % 6, dtype=np.int32),
        "id": index,
    }


LENGTHS = {"turns": {"text": [8, 4], "speaker": 3}, "tokens": 9}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("meta", [["turns", "id"], ["id"]])
def test_resuming_after_any_element_gives_the_same_rest(strategy: str, meta: list[str]) -> None:
    combinator = first_fit_pack if strategy == "first_fit" else best_fit_pack

    def make() -> Any:
        parent = fn.from_dataset(fn.map(document, fn.filter(lambda i: i % 7 != 2, fn.range(70))))
        return combinator(LENGTHS, parent, num_packing_bins=3, seed=5, meta_features=meta)

    n = sum(1 for _ in fn.iterate(make()))
    assert n > 10
    assert_resumable(make, max_elements=n, resume_points=n + 1)


def facade(cls_name: str, **options: Any) -> Any:
    ds = grain.MapDataset.range(60).map(document).to_iter_dataset()
    cls = getattr(grain.experimental, cls_name)
    return cls(ds, length_struct=LENGTHS, num_packing_bins=4, seed=1, **options)


@pytest.mark.parametrize("cls_name", ["FirstFitPackIterDataset", "BestFitPackIterDataset"])
def test_get_state_set_state_and_workers_restore_nested_packing(cls_name: str) -> None:
    make = lambda: facade(cls_name, meta_features=["id"])  # noqa: E731
    assert_get_state_resumes(make)
    assert_same_under_workers(lambda: facade(cls_name, meta_features=["turns"]).batch(2))


def test_a_grain_state_of_nested_packing_continues_in_grainfn() -> None:
    import grain as real

    def make(module: Any) -> Any:
        ds = module.MapDataset.range(40).map(document).to_iter_dataset()
        return module.experimental.BestFitPackIterDataset(
            ds, length_struct=LENGTHS, num_packing_bins=3, seed=2, meta_features=["turns"]
        )

    for taken in (0, 1, 6):
        theirs = iter(make(real))
        for _ in range(taken):
            next(theirs)
        resumed = iter(make(grain))
        resumed.set_state(json.loads(json.dumps(theirs.get_state())))
        assert_all_equal(list(resumed), list(theirs))


def test_the_stage_shows_the_nested_length_struct_with_dict_keys_sorted() -> None:
    stream = first_fit_pack(
        {"tokens": 9, "turns": {"text": [8, 4], "speaker": 3}},
        fn.range(0),
        num_packing_bins=2,
        pack_alignment_struct={"turns": {"speaker": 1, "text": [2, 1]}, "tokens": 1},
    )
    assert stream.describe_stage() == (
        "first_fit_pack({'tokens': 9, 'turns': {'speaker': 3, 'text': [8, 4]}}, "
        "num_packing_bins=2, seed=0, "
        "pack_alignment_struct={'tokens': 1, 'turns': {'speaker': 1, 'text': [2, 1]}})"
    )
    saved = fn.state_to_dict(stream, fn.iterate(stream).state)
    assert saved["pipeline"][0] == stream.describe_stage()


def test_flat_features_are_read_with_one_itemgetter() -> None:
    # The flat hot path stays as it was: nothing of the tree handling per element.
    flat = Block(pack_spec("first_fit", {"x": 4, "y": 2}, 2))
    nested = Block(pack_spec("first_fit", {"x": [2]}, 2))
    assert isinstance(flat.getter, operator.itemgetter)
    assert not isinstance(nested.getter, operator.itemgetter)
