"""Blocks as columns, and workers' rings: an element arrives as it left, whatever its block."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grainfn import fn
from grainfn._src.parallel.columns import Columns
from grainfn._src.parallel.ring import Ring, RingReader
from grainfn._src.parallel.transfer import INLINE_BYTES, decode_block, encode_block

from support.leaks import assert_nothing_left, mapped_rings


def assert_same_in_transit(back: list[Any], block: list[Any]) -> None:
    """`back` is what pickling `block` gives: values, types, key order, dtypes and layouts."""
    expected = pickle.loads(pickle.dumps(block, protocol=5))
    assert len(back) == len(expected)
    for ours, theirs in zip(back, expected):
        assert_same_tree(ours, theirs)


def assert_same_tree(ours: Any, theirs: Any) -> None:
    assert type(ours) is type(theirs)
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)  # the keys in their order
        for key in theirs:
            assert_same_tree(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same_tree(a, b)
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert ours.flags.c_contiguous == theirs.flags.c_contiguous
        assert ours.flags.f_contiguous == theirs.flags.f_contiguous
        assert ours.flags.writeable
        np.testing.assert_array_equal(ours, theirs)
    else:
        np.testing.assert_array_equal(ours, theirs)  # NaN equals NaN here


def round_trip(block: list[Any], ring: Ring | None = None, **kw: Any) -> list[Any]:
    encoded = encode_block(block, ring=ring, **kw)
    reader = None if ring is None else RingReader(os.dup(ring.descriptor))
    try:
        return decode_block(encoded.data, encoded.descriptor, encoded.sizes, encoded.at, reader)
    finally:
        if reader is not None:
            reader.close()


dtypes = st.sampled_from([np.uint8, np.int16, np.float32, np.float64, np.bool_, np.complex64])
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=5)


@st.composite
def like_blocks(draw: st.DrawFn) -> list[Any]:
    """Blocks whose elements share a structure, shapes and dtypes (what columns carry)."""
    dtype, shape = draw(dtypes), draw(shapes)
    size = draw(st.integers(1, 12))
    arrays = [draw(hnp.arrays(dtype, shape)) for _ in range(size)]
    if draw(st.booleans()):  # non-contiguous views, as a flip gives
        arrays = [a[::-1] if a.ndim else a for a in arrays]
    form = draw(st.sampled_from(["array", "dict", "tuple", "list", "nested"]))
    if form == "array":
        return arrays
    if form == "dict":
        return [{"z": a, "label": i, "a": a.sum()} for i, a in enumerate(arrays)]
    if form == "tuple":
        return [(a, str(i)) for i, a in enumerate(arrays)]
    if form == "list":
        return [[a, a] for a in arrays]
    return [{"x": [(a, {"y": a})], "n": None} for a in arrays]


@settings(max_examples=60, deadline=None)
@given(like_blocks(), st.booleans())
def test_a_block_of_like_elements_arrives_as_pickling_gives_it(
    block: list[Any], rows: bool
) -> None:
    assert Columns.plan(block) is not None
    assert_same_in_transit(round_trip(block, Ring(2**20) if rows else None), block)


@pytest.mark.parametrize(
    "block",
    [
        [np.zeros(3), np.zeros(4)],  # shapes differ
        [np.zeros(3), np.zeros(3, np.float32)],  # dtypes differ
        [{"a": np.zeros(3)}, {"b": np.zeros(3)}],  # keys differ
        [{"a": np.zeros(3), "b": 1}, {"b": 1, "a": np.zeros(3)}],  # key order differs
        [np.asfortranarray(np.ones((3, 4)))] * 2,  # F order: unpickles F-ordered
        [np.array([1, "a"], dtype=object)] * 2,  # objects
        [np.ma.masked_array(np.ones(3))] * 2,  # a subclass
        [np.zeros((0, 3))] * 2,  # no bytes
        [1, 2],  # no arrays
        [],
    ],
)
def test_a_block_that_is_not_columns_still_arrives_as_it_left(block: list[Any]) -> None:
    assert Columns.plan(block) is None
    assert_same_in_transit(round_trip(block), block)


def test_fortran_and_object_leaves_travel_beside_the_columns() -> None:
    fortran = np.asfortranarray(np.ones((2, 3)))
    block = [{"image": np.full(4, i), "f": fortran * i} for i in range(3)]
    spec, _ = Columns.plan(block)
    assert spec[2][1] == ("object",)  # the F-ordered leaf is not stacked
    assert_same_in_transit(round_trip(block), block)


def test_small_rows_are_copies_and_large_rows_share_the_block() -> None:
    small = [np.full(100, i, np.uint8) for i in range(4)]
    back = round_trip(small)
    assert not any(np.shares_memory(back[0], other) for other in back[1:])
    assert all(row.base is None for row in back)  # a row kept alone keeps only its bytes
    large = [np.full(INLINE_BYTES, i, np.uint8) for i in range(3)]
    encoded = encode_block(large)
    assert encoded.descriptor is not None and len(encoded.data) < 400
    back = decode_block(encoded.data, encoded.descriptor, encoded.sizes)
    back[1][0] = 9  # writable views of one memory file, each its own row
    assert back[1][0] == 9 and back[0][0] == 0 and back[2][0] == 2


def test_columns_in_a_memory_file_are_aligned_for_their_dtype() -> None:
    block = [{"b": np.ones(5, np.uint8), "x": np.ones(3000, np.float64)} for _ in range(3)]
    encoded = encode_block(block)
    assert encoded.descriptor is not None
    back = decode_block(encoded.data, encoded.descriptor, encoded.sizes)
    assert all(e["x"].flags.aligned for e in back)
    assert_same_in_transit(back, block)


def test_a_ring_carries_small_rows_and_reuses_its_bytes() -> None:
    ring = Ring(64 + 4 * 12_288)
    reader = RingReader(os.dup(ring.descriptor))
    places = []
    for k in range(10):
        block = [np.full(4096, k, np.uint8)] * 3  # 12 KiB a block: four fit
        encoded = encode_block(block, ring=ring)
        assert encoded.descriptor is None and encoded.at is not None
        places.append(encoded.at % ring.capacity)
        back = decode_block(encoded.data, None, encoded.sizes, encoded.at, reader)
        assert [int(row[0]) for row in back] == [k] * 3
    assert places == [0] * 10  # each block copied out before the next: the front, every lap
    reader.close()


def test_a_block_the_ring_cannot_hold_now_travels_in_a_file_of_its_own() -> None:
    ring = Ring(64 + 2**20)
    block = [np.ones(60_000, np.uint8)] * 4  # a quarter of the ring at most goes there
    assert all(encode_block(block, ring=ring).at is not None for _ in range(4))
    fifth = encode_block(block, ring=ring)  # nothing freed yet: no room, and no waiting
    assert fifth.at is None and fifth.descriptor is not None
    fifth.close()
    too_big = encode_block([np.ones(60_000, np.uint8)] * 5, ring=Ring(64 + 2**20))
    assert too_big.at is None and too_big.descriptor is not None
    too_big.close()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.booleans()), max_size=40))
def test_a_ring_never_hands_out_bytes_not_yet_freed(steps: list[tuple[int, bool]]) -> None:
    ring = Ring(64 + 100)
    live: list[tuple[int, int]] = []  # (start, end) since the start, in order
    for size, free_oldest in steps:
        if free_oldest and live:
            ring.free(live.pop(0)[1])
        start = ring.reserve(size)
        if start is None:
            continue
        assert start % 100 + size <= 100  # never wraps
        taken = {p % 100 for a, b in live for p in range(a, b)}
        assert taken.isdisjoint(p % 100 for p in range(start, start + size))
        live.append((start, start + size))


def test_workers_send_small_images_through_their_rings_and_leave_nothing() -> None:
    images = np.random.default_rng(0).integers(0, 255, (3000, 16, 16, 3), dtype=np.uint8)
    stream = fn.batch(32, fn.from_dataset(fn.map(lambda x: x[:, ::-1], fn.source(images))))
    expected = list(fn.iterate(stream))
    it = fn.iterate(fn.mp_prefetch(2, stream, adaptive=False))
    try:
        got = list(it)
        assert mapped_rings() == 2
    finally:
        it.close()
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected):
        np.testing.assert_array_equal(ours, theirs)
    assert_nothing_left()
    assert mapped_rings() == 0
