"""concat_then_split and ConcatThenSplitIterDataset: Grain's rows, resumable anywhere, worker-blind.

Grain 0.2.18 is the oracle where it packs correctly. Where it does not (an
element with two token features cut twice, a BOS part with no token), the
expected rows are written out here, and on any input every token is checked
to come out exactly once (in order, unless whole rows are queued).
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn
from grainfn._src.facade.packing_concat_then_split import BOSHandling, ConcatThenSplitIterDataset
from grainfn._src.packing.concat_then_split import concat_then_split
from grainfn.testing import assert_deterministic, assert_elements_equal, assert_resumable

pytestmark = pytest.mark.grain

BOS = 1


class Case(NamedTuple):
    data: list[dict[str, Any]]
    length_struct: dict[str, int]
    meta_features: tuple[str, ...] = ()
    split_full_length_features: bool = True
    bos_features: tuple[str, ...] = ()


@st.composite
def cases(draw: Any, *, where_grain_is_right: bool) -> Case:
    """Elements with one or two token features and an optional meta feature, and their config.

    Token `k` of element `i` is `100 * (i + 1) + k`, so every token is unique.
    With `where_grain_is_right`, only inputs Grain 0.2.18 packs correctly: two
    token features of different lengths are at most one row long (Grain
    re-emits or drops tokens of an element cut twice at different points),
    and with BOS they have equal lengths and no part is empty (Grain writes
    BOS into the padding for an empty part).
    """
    names = draw(st.sampled_from([("tokens",), ("inputs", "targets")]))
    length_struct = {name: draw(st.integers(1, 8)) for name in names}
    aligned = len(names) == 1 or draw(st.booleans())  # features of equal lengths are cut together
    if aligned:
        length_struct = dict.fromkeys(names, length_struct[names[0]])
    bos_features: tuple[str, ...] = ()
    if aligned or not where_grain_is_right:
        bos_features = tuple(draw(st.lists(st.sampled_from(names), unique=True)))
    longest = 3 if aligned or not where_grain_is_right else 1
    shortest = 1 if bos_features and where_grain_is_right else 0
    meta = draw(st.sampled_from(["", "index", "tags"]))
    if meta:
        length_struct[meta] = draw(st.integers(1, 4))
    data = []
    for i in range(draw(st.integers(0, 10))):
        element: dict[str, Any] = {}
        size = draw(st.integers(shortest, longest * length_struct[names[0]]))
        for name in names:
            if not aligned:
                size = draw(st.integers(shortest, longest * length_struct[name]))
            dtype = draw(st.sampled_from([np.int32, np.int64]))
            element[name] = (100 * (i + 1) + np.arange(size)).astype(dtype)
        if meta == "index":
            element[meta] = i + 1
        elif meta == "tags":
            element[meta] = np.full(draw(st.integers(0, length_struct[meta])), i + 1)
        data.append(element)
    return Case(
        data,
        length_struct,
        (meta,) if meta else (),
        draw(st.booleans()),
        bos_features,
    )


def read_grain(case: Case) -> list[dict[str, np.ndarray]]:
    import grain as real

    bos = {}
    if case.bos_features:
        bos = {
            "bos_handling": real.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
            "bos_token_id": BOS,
            "bos_features": case.bos_features,
        }
    parent = real.MapDataset.source(case.data).to_iter_dataset(real.ReadOptions(num_threads=0))
    return list(
        real.experimental.ConcatThenSplitIterDataset(
            parent,
            length_struct=case.length_struct,
            meta_features=case.meta_features,
            split_full_length_features=case.split_full_length_features,
            **bos,
        )
    )


def facade(case: Case) -> ConcatThenSplitIterDataset:
    bos: dict[str, Any] = {}
    if case.bos_features:
        bos = {
            "bos_handling": BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
            "bos_token_id": BOS,
            "bos_features": case.bos_features,
        }
    return ConcatThenSplitIterDataset(
        grain.MapDataset.source(case.data).to_iter_dataset(),
        length_struct=case.length_struct,
        meta_features=case.meta_features,
        split_full_length_features=case.split_full_length_features,
        **bos,
    )


def core(case: Case) -> fn.Stream[Any]:
    return concat_then_split(
        case.length_struct,
        fn.from_dataset(fn.source(case.data)),
        meta_features=case.meta_features,
        split_full_length_features=case.split_full_length_features,
        bos_features=case.bos_features,
        bos_token_id=BOS if case.bos_features else None,
    )


def assert_all_equal(ours: Sequence[Any], theirs: Sequence[Any]) -> None:
    assert len(ours) == len(theirs), f"{len(ours)} rows, expected {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_elements_equal(a, b, f"row {i}")


def assert_tokens_packed_once(case: Case, rows: list[dict[str, np.ndarray]]) -> None:
    """Each token feature's tokens come out once each, in order (as a set if rows are queued)."""
    for name in case.length_struct:
        if name in case.meta_features:
            continue
        values, firsts = [], []
        for row in rows:
            segment_ids, positions = row[f"{name}_segment_ids"], row[f"{name}_positions"]
            assert not row[name][segment_ids == 0].any(), f"{name}: tokens in the padding"
            ids = segment_ids[segment_ids > 0]
            assert (np.diff(ids) >= 0).all(), f"{name}: segment ids {segment_ids}"
            for segment in np.unique(ids):
                at = np.flatnonzero(segment_ids == segment)
                assert (positions[at] == np.arange(len(at))).all() and np.ptp(at) == len(at) - 1
            values.append(row[name][segment_ids > 0])
            firsts.append(positions[segment_ids > 0] == 0)
        got = np.concatenate(values or [np.zeros(0)]).astype(np.int64)
        first = np.concatenate(firsts or [np.zeros(0, bool)])
        expected = np.concatenate([np.zeros(0)] + [e[name] for e in case.data]).astype(np.int64)
        assert len(got) == len(expected), f"{name}: {len(got)} tokens, expected {len(expected)}"
        kept = ~first if name in case.bos_features else np.ones(len(got), bool)
        assert (got[~kept] == BOS).all()
        if case.split_full_length_features:
            np.testing.assert_array_equal(got[kept], expected[kept])
        else:  # rows that are whole elements are queued behind the row being filled
            counts = collections.Counter(got[kept].tolist())
            assert max(counts.values(), default=1) == 1 and set(counts) <= set(expected.tolist())


# (1) The same rows as Grain.


@pytest.mark.slow
@settings(max_examples=300)
@given(cases(where_grain_is_right=True))
def test_rows_match_grain(case: Case) -> None:
    note(repr(case))
    assert_all_equal(list(facade(case)), read_grain(case))


def test_grain_docstring_example_with_whole_rows_queued_behind_the_row_being_filled() -> None:
    data = [{"x": np.full(n, i + 1)} for i, n in enumerate([3, 6, 2, 5, 6, 4])]
    case = Case(data, {"x": 6}, split_full_length_features=False)
    rows = list(facade(case))
    assert [row["x"].tolist() for row in rows] == [
        [1, 1, 1, 3, 3, 4],
        [2, 2, 2, 2, 2, 2],
        [4, 4, 4, 4, 6, 6],
        [5, 5, 5, 5, 5, 5],
        [6, 6, 0, 0, 0, 0],
    ]
    assert rows[0]["x_segment_ids"].tolist() == [1, 1, 1, 2, 2, 3]
    assert rows[2]["x_positions"].tolist() == [0, 1, 2, 3, 0, 1]
    assert_all_equal(rows, read_grain(case))


def test_meta_features_repeat_in_every_part_and_features_keep_their_shapes() -> None:
    data = [
        {"x": np.ones((3, 2), np.float32), "id": 7},
        {"x": np.zeros((4, 2), np.float32), "id": 8},
    ]
    case = Case(data, {"x": 5, "id": 3}, meta_features=("id",))
    rows = list(facade(case))
    assert [row["id"].tolist() for row in rows] == [[7, 8, 0], [8, 0, 0]]
    assert rows[0]["x"].shape == (5, 2) and rows[0]["x"].dtype == np.float32
    assert set(rows[0]) == {"x", "x_segment_ids", "x_positions", "id"}
    assert_all_equal(rows, read_grain(case))


@settings(max_examples=150)
@given(cases(where_grain_is_right=False))
def test_every_token_is_packed_once_and_any_state_resumes(case: Case) -> None:
    note(repr(case))
    rows = list(fn.iterate(core(case)))
    assert_tokens_packed_once(case, rows)
    assert_resumable(lambda: core(case), max_elements=len(rows), resume_points=len(rows) + 1)


def test_an_element_cut_twice_keeps_each_token_once_unlike_grain() -> None:
    # Grain 0.2.18 puts b's three tokens in the third row again (and can loop
    # forever on such inputs): it cuts the already-cut b at an absolute offset.
    case = Case([{"a": np.arange(25), "b": np.arange(3)}], {"a": 10, "b": 10})
    rows = list(facade(case))
    assert [row["a"].tolist() for row in rows] == [
        list(range(10)),
        list(range(10, 20)),
        [20, 21, 22, 23, 24, 0, 0, 0, 0, 0],
    ]
    assert [row["b_segment_ids"].tolist()[:4] for row in rows] == [[1, 1, 1, 0], [0] * 4, [0] * 4]
    assert_tokens_packed_once(case, rows)


def test_an_empty_part_gets_no_bos_unlike_grain() -> None:
    # Grain 0.2.18 writes BOS one slot past an empty part: into the padding,
    # or past the row (IndexError).
    case = Case([{"a": np.arange(2, 5)}, {"a": np.arange(0)}], {"a": 5}, bos_features=("a",))
    rows = list(facade(case))
    assert [row["a"].tolist() for row in rows] == [[BOS, 3, 4, 0, 0]]
    assert [row["a_segment_ids"].tolist() for row in rows] == [[1, 1, 1, 0, 0]]


# (2) Resuming at any row.


def documents(count: int = 30) -> Any:
    """Map-level work before packing: documents of 1 to 14 tokens, some exactly a row long."""

    def document(i: int) -> dict[str, Any]:
        return {"tokens": np.arange(1 + (i * 7919) % 14, dtype=np.int32) + 100 * i, "doc": i}

    return grain.MapDataset.range(count).map(document).to_iter_dataset()


def packed(count: int = 30) -> ConcatThenSplitIterDataset:
    return ConcatThenSplitIterDataset(
        documents(count),
        length_struct={"tokens": 8, "doc": 4},
        meta_features={"doc"},
        split_full_length_features=False,
        bos_handling=BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
        bos_features={"tokens"},
        bos_token_id=BOS,
    )


def test_the_iterator_resumes_from_get_state_after_any_row() -> None:
    it = iter(packed())
    states, rows = [it.get_state()], []
    for row in it:
        rows.append(row)
        states.append(json.loads(json.dumps(it.get_state())))
    assert any(state["state"]["emitted"] > 0 for state in states)  # mid-round states occur
    assert any(any(state["state"]["offsets"]) for state in states)  # and mid-element ones
    for k, state in enumerate(states):
        resumed = iter(packed())
        resumed.set_state(state)
        assert_all_equal(list(resumed), rows[k:])
    it = iter(packed())
    it.set_state(states[-1])
    assert list(it) == []
    assert states[5]["state"].keys() == {"kind", "emitted", "offsets", "parent"}


def test_the_core_stream_is_deterministic_and_resumable() -> None:
    count = len(list(packed()))
    assert_deterministic(lambda: packed().core)
    assert_resumable(lambda: packed().core, max_elements=count, resume_points=count + 1)


# (3) The worker count changes nothing.


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_the_rows_do_not_depend_on_the_worker_count(workers: int) -> None:
    expected = list(packed())
    options = grain.MultiprocessingOptions(num_workers=workers)
    with iter(packed().mp_prefetch(options)) as it:
        rows = list(itertools.islice(it, 5))
        state = it.get_state()
        rows.extend(it)
    assert_all_equal(rows, expected)
    resumed = iter(packed())  # a state saved with workers restores without
    resumed.set_state(state)
    assert_all_equal(list(resumed), expected[5:])


# (4) Clear errors.


def stream() -> fn.Stream[Any]:
    return fn.from_dataset(fn.source([{"a": np.arange(3), "m": 1}]))


@pytest.mark.parametrize(
    ("length_struct", "options", "error", "match"),
    [
        ([("a", 4)], {}, TypeError, r"length_struct must be a non-empty dict"),
        ({}, {}, TypeError, r"length_struct must be a non-empty dict"),
        ({"a": 0}, {}, ValueError, r"length_struct\['a'\] must be a positive integer, got 0"),
        ({"a": 2.5}, {}, TypeError, r"length_struct\['a'\] must be a positive integer"),
        ({1: 4}, {}, TypeError, r"keys must be feature names \(str\), got 1"),
        ({"a": 4}, {"meta_features": "m"}, TypeError, r"meta_features must be a collection"),
        ({"a": 4}, {"meta_features": ["m"]}, ValueError, r"meta_features names 'm', not a"),
        ({"a": 4, "m": 1}, {"bos_features": ["q"]}, ValueError, r"bos_features names 'q'"),
        (
            {"a": 4, "m": 1},
            {"meta_features": ["m"], "bos_features": ["m"], "bos_token_id": 0},
            ValueError,
            r"must not overlap: \['m'\]",
        ),
        ({"a": 4}, {"bos_features": ["a"]}, ValueError, r"=\['a'\] and bos_token_id=None go"),
        ({"a": 4}, {"bos_token_id": 3}, ValueError, r"=\[\] and bos_token_id=3 go together"),
        ({"a": 4}, {"bos_features": ["a"], "bos_token_id": "1"}, TypeError, "bos_token_id must"),
        ({"a": 4}, {"split_full_length_features": 1}, TypeError, r"must be True or False, got 1"),
    ],
)
def test_bad_arguments_are_named(
    length_struct: Any, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        concat_then_split(length_struct, stream(), **options)


def test_the_data_must_be_a_stream_or_a_dataset() -> None:
    with pytest.raises(
        TypeError, match=r"concat_then_split needs a grainfn Stream or Dataset, got .* of type list"
    ):
        concat_then_split({"a": 4}, [{"a": [1]}])
    rows = fn.iterate(concat_then_split({"a": 2}, fn.source([{"a": [1, 2, 3]}])))
    assert [row["a"].tolist() for row in rows] == [[1, 2], [3, 0]]
    with pytest.raises(TypeError, match="takes an IterDataset, got"):
        ConcatThenSplitIterDataset(grain.MapDataset.range(3), length_struct={"a": 4})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("element", "match"),
    [
        (3, r"flat dicts with exactly the features of length_struct \['a', 'm'\], got 3 \(int\)"),
        ({"a": [1]}, r"got a dict with keys \['a'\]"),
        ({"a": [1], "m": 1, "z": 2}, r"got a dict with keys \['a', 'm', 'z'\]"),
        ({"a": [1], "n": 1}, r"got a dict with keys \['a', 'n'\]"),
    ],
)
def test_elements_without_exactly_the_features_are_refused(element: Any, match: str) -> None:
    packer = concat_then_split({"a": 4, "m": 1}, fn.from_dataset(fn.source([element])))
    with pytest.raises(ValueError, match=match):
        list(fn.iterate(packer))


def test_a_meta_feature_longer_than_its_row_is_refused_after_the_rows_before_it() -> None:
    data = [{"a": np.arange(3), "m": np.arange(2)}, {"a": np.arange(3), "m": np.arange(4)}]
    it = fn.iterate(
        concat_then_split({"a": 6, "m": 3}, fn.from_dataset(fn.source(data)), meta_features={"m"})
    )
    assert next(it)["m"].tolist() == [0, 1, 0]  # as Grain, which then fails internally
    with pytest.raises(ValueError, match=r"Meta feature 'm' has length 4, more than its row"):
        next(it)


def test_a_state_of_another_pipeline_or_a_corrupt_one_is_refused() -> None:
    it = iter(packed())
    next(it)
    state = it.get_state()
    other = iter(ConcatThenSplitIterDataset(documents(), length_struct={"tokens": 8, "doc": 4}))
    with pytest.raises(ValueError, match="State belongs to another pipeline"):
        other.set_state(state)
    bad_offsets = json.loads(json.dumps(state))
    bad_offsets["state"]["offsets"] = [1, 2]
    with pytest.raises(ValueError, match=r"offsets must be 1 integers >= 0 .*got \(1, 2\)"):
        iter(packed()).set_state(bad_offsets)
    negative = json.loads(json.dumps(state))
    negative["state"]["emitted"] = -1
    with pytest.raises(ValueError, match=r"State field emitted must be an integer >= 0, got -1"):
        iter(packed()).set_state(negative)
    too_far = json.loads(json.dumps(state))
    too_far["state"]["emitted"] = 50
    with pytest.raises(ValueError, match="State field emitted is 50, but the round"):
        iter(packed()).set_state(too_far)
    past_end = json.loads(json.dumps(state))
    past_end["state"]["offsets"] = [99]
    with pytest.raises(
        ValueError, match=r"State offsets \[99\] point past the element at this position"
    ):
        iter(packed()).set_state(past_end)
