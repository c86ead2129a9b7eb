"""filter: holes in datasets, dropped elements in streams; blocks read as single elements.

A stream filter read in blocks (`next_many`) is the same filter read one element
at a time: elements, states after each read, errors and the filter check's
windows must not depend on how many elements a consumer asks for at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.filter_check import GRAIN_CHECK, FilterCheck
from grainfn._src.stages.filter import FilteredStream
from grainfn.testing import add_one

from support import conformance


def test_filter_leaves_none_and_elements_skips_it() -> None:
    ds = fn.filter(lambda x: x % 3 == 0, fn.range(10))
    assert ds.get_many([0, 1, 3]) == [0, None, 3]
    assert list(fn.elements(ds)) == [0, 3, 6, 9]
    assert list(fn.elements(ds, allow_nones=True))[:3] == [0, None, None]
    assert fn.map(add_one, ds).get(1) is None


def keeps(pattern: list[bool]) -> Any:
    return lambda x: pattern[x % len(pattern)]


def read(stream: fn.Stream, sizes: list[int]) -> list[tuple[list[Any], Any]]:
    """The elements and the state after each `next_many(size)`."""
    cursor = stream.open(stream.init())
    out = [(cursor.next_many(size), cursor.state()) for size in sizes]
    cursor.close()
    return out


def one_by_one(stream: fn.Stream, sizes: list[int]) -> list[tuple[list[Any], Any]]:
    cursor = stream.open(stream.init())
    out = []
    for size in sizes:
        taken = []
        for _ in range(size):
            try:
                taken.append(cursor.next())
            except StopIteration:
                break
        out.append((taken, cursor.state()))
    cursor.close()
    return out


@given(
    st.lists(st.booleans(), min_size=1, max_size=9),
    st.lists(st.integers(0, 300), min_size=1, max_size=8),
    st.sampled_from([None, FilterCheck(warn_ratio=None, raise_ratio=None), GRAIN_CHECK]),
)
def test_blocks_give_the_elements_and_states_of_single_reads(
    pattern: list[bool], sizes: list[int], check: FilterCheck | None
) -> None:
    leaf = fn.from_dataset(fn.range(700))
    stream = FilteredStream(leaf, keeps(pattern), **({} if check is None else {"check": check}))
    assert read(stream, sizes) == one_by_one(stream, sizes)


@pytest.mark.parametrize("size", [1, 7, 64, 999, 1000, 1001, 2500])
def test_the_check_raises_at_the_same_window_whatever_the_block(size: int) -> None:
    # Windows of 1000 elements: the first drops 50%, the second 95%.
    def keep(x: int) -> bool:
        return x % 2 == 0 if x < 1000 else x % 20 == 0

    check = FilterCheck(warn_ratio=None, raise_ratio=0.9)
    stream = FilteredStream(fn.from_dataset(fn.range(3000)), keep, check)
    cursor = stream.open(stream.init())
    taken: list[int] = []
    with pytest.raises(ValueError, match=r"dropped 95\.00% of the last 1000"):
        while True:
            block = cursor.next_many(size)
            assert block, "the check never raised"
            taken += block
    assert all(x < 2000 for x in taken)


def test_an_error_in_a_block_names_the_stage_and_where() -> None:
    def fragile(x: int) -> bool:
        if x == 37:
            raise KeyError("bad record 37")
        return True

    stream = fn.filter(fragile, fn.from_dataset(fn.range(100)))
    cursor = stream.open(stream.init())
    with pytest.raises(KeyError) as caught:
        cursor.next_many(64)
    notes = "\n".join(caught.value.__notes__)
    assert "fragile)" in notes and "one of the 64 stream elements" in notes


def test_an_array_verdict_in_a_block_is_the_clear_error() -> None:
    stream = fn.filter(lambda x: np.array([x, x]), fn.from_dataset(fn.range(100)))
    cursor = stream.open(stream.init())
    with pytest.raises(TypeError, match="must return a bool; reading one of the 40"):
        cursor.next_many(40)


def test_a_full_filter_check_window_of_array_elements_is_counted() -> None:
    # A window that fills inside a block of arrays: its holes are counted by identity
    # (`list.count(None)` compared each array with None and failed).
    import numpy as np

    import grainfn

    pairs = grainfn.MapDataset.range(3000).map(lambda x: np.array([x, x]))
    kept = pairs.filter(lambda a: a[0] % 2 == 0).to_iter_dataset().batch(600)
    batches = list(kept)
    assert [len(b) for b in batches] == [600, 600, 300]
    assert np.concatenate(batches)[:, 0].tolist() == list(range(0, 3000, 2))


def test_an_iterator_warns_first_then_once_a_minute(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import grainfn as grain
    from grainfn._src.core import filter_check

    now = [1000.0]
    monkeypatch.setattr(filter_check.time, "monotonic", lambda: now[0])

    def warnings() -> int:
        return sum("of the last 1000 elements" in r.getMessage() for r in caplog.records)

    ds = grain.MapDataset.range(6000).filter(lambda x: x % 20 == 0).to_iter_dataset()
    plain = grain.MapDataset.range(6000).to_iter_dataset().filter(lambda x: x % 20 == 0)
    with caplog.at_level("WARNING"):
        it = iter(ds)
        first = [next(it) for _ in range(100)]  # 2000 positions: two full windows, one warning
        assert warnings() == 1
        now[0] += 59.0
        first += [next(it) for _ in range(50)]
        assert warnings() == 1
        now[0] += 2.0  # a minute after the first: the next full window warns again
        first += list(it)
        assert warnings() == 2
        other = iter(ds)  # a new iterator warns at its first full window
        assert list(other) == first == list(range(0, 6000, 20))
        assert warnings() == 3
        assert list(plain) == first  # a stream filter too, with its own iterator
        assert warnings() == 4


test_conforms = conformance.conforms(
    conformance.Example("filter(keep_even)", lambda: fn.filter(conformance.keep_even, fn.range(9))),
    conformance.Example(
        "filter(keep_even)",
        lambda: fn.filter(conformance.keep_even, conformance.numbers(9)),
    ),
)
