"""The Dataset record and its index- and element-stage bases: get, get_many, trace, lines."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.dataset import (
    INFINITE,
    Dataset,
    ElementStage,
    IndexStage,
    OneParent,
    ParentIndex,
    function_name,
    pipeline_lines,
    read_each,
    read_many,
    set_length,
    upstream_holes,
)


@dataclasses.dataclass(frozen=True, repr=False)
class Reversed(IndexStage[Any]):
    """The parent's positions backwards, epoch by epoch: one `parent_indices` rule."""

    def parent_indices(self, indices: np.ndarray) -> np.ndarray:
        n = self.parent.length
        return indices // n * n + (n - 1 - indices % n)

    def describe_stage(self) -> str:
        return "reversed()"


@dataclasses.dataclass(frozen=True, repr=False)
class Squared(ElementStage[Any]):
    """Each parent element squared, one at a time or a block at once."""

    block_reads: list[int] = dataclasses.field(default_factory=list, compare=False)

    def _get(self, index: int) -> Any:
        return self.parent._get(index) ** 2

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        self.block_reads.append(len(indices))
        return [x**2 for x in self.parent._get_many(indices)]


@dataclasses.dataclass(frozen=True, repr=False)
class Bare(Dataset[Any]):
    """A leaf of 3 positions that defines `_get` alone."""

    def __post_init__(self) -> None:
        set_length(self, 3)

    def _get(self, index: int) -> Any:
        return index % 3


def test_an_index_stage_reads_one_element_a_block_and_a_trace_from_one_rule() -> None:
    ds = Reversed(fn.range(5))
    assert ds.length == 5
    assert [ds.get(i) for i in range(7)] == [4, 3, 2, 1, 0, 4, 3]  # 5 and 6: epoch 1
    assert ds.get_many([6, 0, 2]) == [3, 4, 2]
    assert ds.parent_index(1) == 3
    assert ds.trace_parent(1) == ParentIndex(0, 3, 1)
    assert ds.parents == (ds.parent,)


def test_an_element_stage_keeps_the_length_and_traces_straight_through() -> None:
    ds = Squared(fn.range(4))
    assert ds.length == 4 and ds.get(3) == 9
    assert ds.get_many(np.array([1, 2], dtype=np.int32)) == [1, 4]
    assert ds.block_reads == [2]  # one block read, not one per position
    assert ds.trace_parent(2) == ParentIndex(0, 2)


def test_a_leaf_defining_get_alone_reads_blocks_one_position_at_a_time() -> None:
    assert Bare().get_many([0, 4]) == [0, 1]
    assert Bare().parents == () and Bare().pipeline_seed is None
    assert not Bare().has_device_form and fn.range(3).has_device_form
    with pytest.raises(TypeError, match=r"Cannot trace through the stage 'Bare' \(Bare\)"):
        Bare().trace_parent(0)


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        (-1, IndexError, "index must be >= 0, got -1; indices past the length are later epochs"),
        (2**63, IndexError, r"index must be at most 2\*\*63 - 1"),
        (1.0, TypeError, "index must be an integer, got 1.0 of type float"),
        (True, TypeError, "index must be an integer, got True"),
    ],
)
def test_get_refuses_what_is_not_a_position(index: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        fn.range(3).get(index)


@pytest.mark.parametrize(
    ("indices", "error", "message"),
    [
        ([[0, 1]], TypeError, r"a 1-D sequence of integers, got an array of shape \(1, 2\)"),
        ([0.5], TypeError, "and dtype float64"),
        ([0, -2], IndexError, "indices must be >= 0, got -2"),
        ([2**64 - 1], IndexError, r"indices must be in \[0, 2\*\*63 - 1\], got 1844"),
    ],
)
def test_get_many_refuses_what_is_not_a_block_of_positions(
    indices: Any, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        fn.range(3).get_many(indices)


def test_an_empty_dataset_has_no_position_to_read() -> None:
    empty = fn.range(0)
    assert empty.get_many([]) == []
    with pytest.raises(IndexError, match="Cannot read index 0 of an empty dataset"):
        empty.get(0)
    with pytest.raises(IndexError, match="Cannot read from an empty dataset"):
        empty.get_many([0])


def test_a_failing_block_is_read_again_one_position_at_a_time() -> None:
    def fails_at_2(x: int) -> int:
        if x == 2:
            raise ValueError("bad 2")
        return x

    ds = fn.map(fails_at_2, fn.range(4))
    assert read_many(ds, np.array([0, 1])) == [0, 1]
    with pytest.raises(ValueError, match="bad 2") as raised:
        read_many(ds, np.array([3, 2]))
    assert any("position 2" in note for note in raised.value.__notes__)
    assert read_each(fn.range(3), np.array([2, 5])) == [2, 2]


def test_function_name_prefers_a_display_name_then_the_qualified_name() -> None:
    class Parse:
        display_name = "parse records"

    class Call:
        def __call__(self, x: int) -> int:
            return x

    assert function_name(Parse()) == "parse records"
    assert function_name(len) == "len"
    assert function_name(Call()).endswith("Call")
    assert function_name(functools.partial(len)).endswith("partial")


def test_upstream_holes_finds_the_nearest_stage_that_leaves_holes() -> None:
    holes = fn.filter(bool, fn.range(5))
    assert upstream_holes(fn.map(str, holes)) is holes
    assert upstream_holes(fn.map(str, fn.range(5))) is None
    mixed = fn.concatenate([fn.range(2), holes])
    assert upstream_holes(mixed) is holes


def test_pipeline_lines_indent_the_parents_and_show_lengths() -> None:
    ds = fn.map(str, Reversed(fn.repeat(None, fn.range(3))))
    assert pipeline_lines(ds)[1:] == [
        "  reversed()  [length inf]",
        f"    {fn.repeat(None, fn.range(3)).describe_stage()}  [length inf]",
        "      range(0, 3, 1)  [length 3]",
    ]
    assert repr(Reversed(fn.range(2))) == "reversed()  [length 2]\n  range(0, 2, 1)  [length 2]"
    assert fn.repeat(None, fn.range(3)).length == INFINITE


def test_set_length_fills_the_frozen_field() -> None:
    ds = Bare()
    set_length(ds, 7)
    assert ds.length == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.length = 8  # type: ignore[misc]
    assert isinstance(Reversed(fn.range(1)), OneParent)
