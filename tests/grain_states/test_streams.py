"""The Grain-state translators are driven by each stage's declared `grain_state`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from grainfn import fn
from grainfn._src.core import state as records
from grainfn._src.core.grain_state import GrainKeys, OwnGrainState
from grainfn._src.core.stream import OneParentStream, WrappingStream, stage_kinds
from grainfn._src.grain_states.streams import from_grain, stages, to_grain
from grainfn._src.stages.limit import LimitedStream

DOCS = Path(__file__).resolve().parents[2] / "docs"


class SkipState(NamedTuple):
    """A stage made up for these tests: its counter and its parent's state."""

    skipped: int
    parent: Any


@dataclasses.dataclass(frozen=True, repr=False)
class SkipStream(WrappingStream):
    """A stage that only declares its Grain keys: nothing else knows of it."""

    record = SkipState
    grain_state = GrainKeys("SkipIterDataset", SkipState, (("skipped_so_far", "skipped"),))


def test_a_stage_read_and_written_from_its_declaration_alone() -> None:
    stream = SkipStream(fn.from_dataset(fn.range(9)))
    grains = {"parent": {"next_index": 4}, "skipped_so_far": 2}
    record = from_grain(stream, grains)
    assert record == SkipState(2, records.DatasetPosition(4))
    assert to_grain(stream, record) == grains


def _read_twice(stream: Any, grains: Any, path: str, beneath: Any) -> Any:
    (parent,) = grains["twice"]
    return SkipState(0, beneath(stream.parent, parent, f"{path}.twice[0]"))


def _write_twice(stream: Any, record: Any, path: str, beneath: Any) -> Any:
    return {"twice": [beneath(stream.parent, record.parent, f"{path}.twice[0]")]}


@dataclasses.dataclass(frozen=True, repr=False)
class TwiceStream(OneParentStream):
    """A stage whose Grain state is its own shape: it declares a reader and a writer."""

    grain_state = OwnGrainState("TwiceIterDataset", _read_twice, _write_twice)


def test_a_stage_with_its_own_reader_and_writer_needs_nothing_else() -> None:
    stream = fn.limit(5, TwiceStream(fn.from_dataset(fn.range(9))))
    grains = {"parent": {"twice": [{"next_index": 3}]}, "count_elements_read": 1}
    record = from_grain(stream, grains)
    assert record.parent == SkipState(0, records.DatasetPosition(3))
    assert to_grain(stream, record) == grains


def test_a_missing_key_is_named() -> None:
    stream = fn.limit(3, fn.from_dataset(fn.range(9)))
    with pytest.raises(ValueError, match=r"state should hold 'count_elements_read'"):
        from_grain(stream, {"parent": {"next_index": 1}})


def test_a_stage_without_a_grain_state_is_refused_listing_the_declared_ones() -> None:
    stream = fn.filter(bool, fn.zip([fn.from_dataset(fn.range(3))]))
    assert to_grain(stream, stream.init()) == {"parents": [{"next_index": 0}]}
    packed = fn.concat_then_split({"x": 4}, fn.from_dataset(fn.range(3)))
    with pytest.raises(ValueError, match=r"Grain states are written for .*LimitIterDataset"):
        to_grain(packed, packed.init())


def test_the_declaration_names_the_keys_in_order() -> None:
    keys = LimitedStream.grain_state
    assert isinstance(keys, GrainKeys) and keys.names() == ("parent", "count_elements_read")


def test_the_checkpointing_page_lists_the_declared_stages() -> None:
    text = " ".join((DOCS / "checkpointing.md").read_text().split())
    listed = re.search(r"for these, by Grain's names: (.*?)\. Each stage declares", text)
    assert listed is not None
    assert listed.group(1) == ", ".join(stages())


def test_the_migration_table_gives_each_declared_stage_its_keys() -> None:
    page = (DOCS / "migrating-from-grain.md").read_text()
    section = page[page.index("The Grain states read, stage by stage:") :]
    table = section[: section.index("\n\n", section.index("| ---"))].splitlines()
    for kind in stage_kinds():
        keys = kind.grain_state
        if not isinstance(keys, GrainKeys):  # counters over a parent: their keys are listed
            continue
        for name in keys.stage.split(" and "):
            shown = f"`{name.removeprefix('IterDataset.')}`"
            rows = [line for line in table if shown in line.split(" | ")[0]]
            assert rows, f"docs/migrating-from-grain.md has no row for {shown}"
            row = rows[0]
            missing = [key for key in keys.names() if f'"{key}"' not in row]
            assert not missing, f"the row of {shown} lacks the keys {missing}: {row}"
