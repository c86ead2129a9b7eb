"""Pack-and-batch (Grain's legacy PackAndBatchOperation): its output, its states, workers.

Every token value encodes its element and position (`1000 * element + 100 *
feature + position + 1`), so a batch can be read back into which elements
each row holds; that is compared with a plain-Python first-fit packer.
"""

from __future__ import annotations

import collections
import itertools
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn as grain
import grainfn.python
from grainfn import fn
from grainfn._src.core.state_codec import state_to_dict
from grainfn._src.packing.pack_and_batch import PackAndBatchState, pack_and_batch
from grainfn.testing import assert_elements_equal, assert_resumable

FEATURES = ("inputs", "targets")


def document(index: int, sizes: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Element `index` with features of `sizes` tokens, each token naming where it came from."""
    return {
        name: (1000 * index + 100 * f + np.arange(size) + 1).astype(np.int32)
        for f, (name, size) in enumerate(zip(FEATURES, sizes))
    }


def reference(
    sizes: list[tuple[int, ...]], lengths: tuple[int, ...], batch_size: int, limit: int | None
) -> list[list[list[int]]]:
    """First-fit by hand: per batch, per row, the indices of the elements in it."""
    batches: list[list[list[int]]] = []
    rows: list[list[int]] = [[] for _ in range(batch_size)]
    used = [[0] * len(lengths) for _ in range(batch_size)]

    def free_row(size: tuple[int, ...]) -> int | None:
        for r in range(batch_size):
            fits = all(u + s <= n for u, s, n in zip(used[r], size, lengths))
            if fits and (limit is None or len(rows[r]) < limit):
                return r
        return None

    for index, size in enumerate(sizes):
        row = free_row(size)
        if row is None:
            batches.append(rows)
            rows, used = [[] for _ in range(batch_size)], [[0] * len(lengths) for _ in rows]
            row = 0
        rows[row].append(index)
        used[row] = [u + s for u, s in zip(used[row], size)]
    if sizes:
        batches.append(rows)
    return batches


def read_back(batch: Any, lengths: tuple[int, ...], batch_size: int) -> list[list[int]]:
    """The elements in each row of `batch`, after checking its arrays are a valid packing."""
    data, segment_ids, positions = batch
    rows: list[list[int]] = [[] for _ in range(batch_size)]
    for f, (name, length) in enumerate(zip(FEATURES, lengths)):
        values, segments, places = data[name], segment_ids[name], positions[name]
        assert values.shape == segments.shape == places.shape == (batch_size, length)
        assert segments.dtype == places.dtype == np.int32
        for r in range(batch_size):
            used = int(np.count_nonzero(segments[r]))
            # Segments 1, 2, ... in runs, then padding: zeros everywhere.
            assert np.all(segments[r, used:] == 0) and np.all(segments[r, :used] > 0)
            assert np.all(np.diff(segments[r, :used]) >= 0)
            assert np.all(values[r, used:] == 0) and np.all(places[r, used:] == 0)
            elements = []
            for segment in range(1, int(segments[r].max(initial=0)) + 1):
                cells = np.flatnonzero(segments[r] == segment)
                if cells.size:  # an element empty in this feature has no cells here
                    token = values[r, cells]
                    index = int(token[0] - 1) // 1000
                    expected = 1000 * index + 100 * f + np.arange(cells.size) + 1
                    assert token.tolist() == expected.tolist()
                    assert places[r, cells].tolist() == list(range(cells.size))
                    elements.append((segment, index))
            if f == 0:
                rows[r] = [index for _, index in elements]
            else:  # the other feature's segments name the same elements
                known = dict(zip(range(1, len(rows[r]) + 1), rows[r]))
                assert all(known.get(s) == i for s, i in elements)
    return rows


documents = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 5)), max_size=30)


@given(
    sizes=documents,
    batch_size=st.integers(1, 4),
    limit=st.sampled_from([None, 1, 2, 3]),
)
def test_every_element_once_in_order_first_fit(
    sizes: list[tuple[int, int]], batch_size: int, limit: int | None
) -> None:
    lengths = (6, 5)
    docs = fn.source([document(i, size) for i, size in enumerate(sizes)])
    stream = pack_and_batch(
        dict(zip(FEATURES, lengths)), batch_size, docs, max_sequences_per_bin=limit
    )
    batches = list(fn.iterate(stream))
    got = [read_back(batch, lengths, batch_size) for batch in batches]
    assert got == reference(sizes, lengths, batch_size, limit)
    flat = [i for rows in got for row in rows for i in row]
    assert sorted(flat) == list(range(len(sizes)))  # every element exactly once
    for rows in got:
        assert all(limit is None or len(row) <= limit for row in rows)
        assert all(row == sorted(row) for row in rows)  # segments follow the input order


def test_dtypes_come_from_each_batchs_first_element_and_empty_rows_are_zeros() -> None:
    docs = [
        {"x": np.arange(1, 4, dtype=np.int16)},
        {"x": np.array([7.9, 8.2])},  # cast into the batch's int16, as Grain does
        {"x": np.ones(4)},
        {"x": np.arange(2, dtype=np.uint8)},
    ]
    out = list(fn.iterate(pack_and_batch({"x": 5}, 2, fn.source(docs))))
    assert len(out) == 2
    (first, segments, _), (second, _, positions) = out
    assert first["x"].dtype == np.int16 and second["x"].dtype == np.uint8
    assert first["x"].tolist() == [[1, 2, 3, 7, 8], [1, 1, 1, 1, 0]]
    assert segments["x"].tolist() == [[1, 1, 1, 2, 2], [1, 1, 1, 1, 0]]
    assert second["x"].tolist() == [[0, 1, 0, 0, 0], [0] * 5]
    assert positions["x"].tolist() == [[0, 1, 0, 0, 0], [0] * 5]


Pair = collections.namedtuple("Pair", ["tokens", "labels"])


@pytest.mark.parametrize(
    ("length_struct", "element", "expected"),
    [
        (4, np.arange(1, 3), [[1, 2, 0, 0]]),
        ((3, [2]), (np.arange(1, 3), [np.arange(5, 6)]), ([[1, 2, 0]], [[[5, 0]]])),
        (Pair(3, 2), Pair(np.arange(1, 3), np.arange(5, 6)), Pair([[1, 2, 0]], [[5, 0]])),
        ({"b": {"y": 2}, "a": 3}, {"a": np.arange(1, 3), "b": {"y": [9]}}, None),
    ],
)
def test_nested_structures_are_packed_leaf_by_leaf(
    length_struct: Any, element: Any, expected: Any
) -> None:
    [(data, segments, _)] = fn.iterate(pack_and_batch(length_struct, 1, fn.source([element])))
    if expected is None:  # dicts come out with sorted keys, as from jax.tree_util
        assert list(data) == ["a", "b"]
        assert data["a"].tolist() == [[1, 2, 0]] and data["b"]["y"].tolist() == [[9, 0]]
        assert segments["b"]["y"].tolist() == [[1, 0]]
        return
    assert type(data) is (np.ndarray if isinstance(expected, list) else type(expected))
    assert fn_tolist(data) == fn_tolist(expected)


def fn_tolist(tree: Any) -> Any:
    if isinstance(tree, (list, tuple)):
        return [fn_tolist(item) for item in tree]
    return np.asarray(tree).tolist()


def packed_stream(count: int, batch_size: int = 3, limit: int | None = 2) -> Any:
    def doc(i: int) -> dict[str, np.ndarray]:
        return document(i, (1 + (i * 7) % 6, 1 + (i * 5) % 5))

    parent = fn.from_dataset(fn.map(doc, fn.filter(lambda i: i % 5 != 3, fn.range(count))))
    lengths = {"inputs": 6, "targets": 5}
    return pack_and_batch(lengths, batch_size, parent, max_sequences_per_bin=limit)


@pytest.mark.parametrize(("batch_size", "limit"), [(1, None), (3, 2), (4, None)])
def test_resuming_after_any_batch_gives_the_same_rest(batch_size: int, limit: int | None) -> None:
    n = len(list(fn.iterate(packed_stream(60, batch_size, limit))))
    assert n > 5
    assert_resumable(
        lambda: packed_stream(60, batch_size, limit), max_elements=n, resume_points=n + 1
    )


def test_the_state_is_the_batches_yielded_and_the_parents_state_before_the_next() -> None:
    stream = packed_stream(60)
    it = fn.iterate(stream)
    assert it.state == PackAndBatchState(0, fn.DatasetPosition(0))
    next(it)
    state = it.state
    # The element that did not fit was read, but the state points before it.
    assert isinstance(state, PackAndBatchState) and state.emitted == 1
    rows = read_back(next(fn.iterate(stream)), (6, 5), 3)
    last = max(i for row in rows for i in row)
    assert state.parent == fn.DatasetPosition(last + 1)
    saved = state_to_dict(stream, state)
    assert json.loads(json.dumps(saved)) == saved
    assert saved["pipeline"][0] == (
        "pack_and_batch({'inputs': 6, 'targets': 5}, batch_size=3, max_sequences_per_bin=2)"
    )
    with pytest.raises(ValueError, match="expects a PackAndBatchState"):
        fn.iterate(stream, fn.DatasetPosition(0))


def test_the_output_and_the_states_do_not_depend_on_workers() -> None:
    expected = list(fn.iterate(packed_stream(80)))
    for workers in (1, 2):
        it = fn.iterate(fn.mp_prefetch(workers, packed_stream(80)))
        head = list(itertools.islice(it, 4))
        state = it.state
        assert_elements_equal(head + list(it), expected)
        it.close()
        resumed = list(fn.iterate(packed_stream(80), state))
        assert_elements_equal(resumed, expected[4:])


def loader(worker_count: int, *extra: Any) -> grain.DataLoader:
    def doc(i: int) -> dict[str, np.ndarray]:
        return document(i, (1 + (i * 7) % 6, 1 + (i * 3) % 5))

    return grain.DataLoader(
        data_source=[doc(i) for i in range(50)],
        sampler=grain.samplers.IndexSampler(
            50, shuffle=True, seed=5, num_epochs=2, shard_options=grain.sharding.NoSharding()
        ),
        operations=[
            grainfn.python.FilterOperation(lambda d: d["inputs"].size != 2),
            grain.experimental.PackAndBatchOperation(
                {"inputs": 6, "targets": 5}, batch_size=3, max_sequences_per_bin=2
            ),
            *extra,
        ],
        worker_count=worker_count,
    )


def test_a_dataloader_packs_the_records_in_order_with_any_worker_count() -> None:
    sampler = grain.samplers.IndexSampler(
        50, shuffle=True, seed=5, num_epochs=2, shard_options=grain.sharding.NoSharding()
    )
    keys = [sampler[i].record_key for i in range(100)]
    kept = [k for k in keys if 1 + (k * 7) % 6 != 2]
    sizes = [(1 + (k * 7) % 6, 1 + (k * 3) % 5) for k in kept]
    expected = list(loader(0))
    got = [read_back(batch, (6, 5), 3) for batch in expected]  # the tokens name record keys
    assert got == [
        [[kept[i] for i in row] for row in rows] for rows in reference(sizes, (6, 5), 3, 2)
    ]
    for workers in (1, 2):
        assert_elements_equal(list(loader(workers)), expected)


def test_a_dataloader_restores_after_every_batch_with_other_worker_counts() -> None:
    def add_one(batch: Any) -> Any:
        data, segments, _ = batch
        return {"inputs": data["inputs"] + 1, "segments": segments["targets"]}

    expected = list(loader(0, grainfn.python.MapOperation(add_one)))
    assert len(expected) > 10
    for saved_with, restored_with in ((0, 0), (2, 0), (0, 2)):
        with iter(loader(saved_with, grainfn.python.MapOperation(add_one))) as it:
            states = [it.get_state()]
            for _ in expected:
                next(it)
                states.append(it.get_state())
        cuts = range(len(expected) + 1) if restored_with == 0 else (1, len(expected) // 2)
        for cut in cuts:
            with iter(loader(restored_with, grainfn.python.MapOperation(add_one))) as resumed:
                resumed.set_state(states[cut])
                assert_elements_equal(list(resumed), expected[cut:], f"restored at {cut}")
