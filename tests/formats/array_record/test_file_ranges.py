"""The index math from source indices to (file, position), against Python lists."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.formats.array_record.file_ranges import file_ranges, locate, split_by_file


def reference(counts: list[int]) -> list[tuple[int, int]]:
    """(file, position) of every record, from concatenating the files as lists."""
    return [(file, position) for file, count in enumerate(counts) for position in range(count)]


@st.composite
def counts_and_keys(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    counts = draw(st.lists(st.integers(0, 6), min_size=1, max_size=6))
    total = sum(counts)
    keys = draw(st.lists(st.integers(0, total - 1), max_size=20)) if total else []
    return counts, keys


@given(counts_and_keys())
def test_locate_matches_the_concatenated_lists(case: tuple[list[int], list[int]]) -> None:
    counts, _ = case
    where = file_ranges(counts)
    assert where.length == sum(counts)
    assert [locate(where, i) for i in range(where.length)] == reference(counts)


@given(counts_and_keys())
def test_split_by_file_groups_a_block_and_keeps_its_slots(
    case: tuple[list[int], list[int]],
) -> None:
    counts, keys = case
    if not keys:
        return
    expected = reference(counts)
    parts = split_by_file(file_ranges(counts), keys)
    assert [part.file for part in parts] == sorted({expected[k][0] for k in keys})
    seen = []
    for part in parts:
        slots = list(range(len(keys))) if part.slots is None else part.slots
        assert part.slots is None or len(parts) > 1
        assert [expected[keys[s]] for s in slots] == [(part.file, p) for p in part.positions]
        assert slots == sorted(slots)
        seen.extend(slots)
    assert sorted(seen) == list(range(len(keys)))
