"""Behaviours of Grain's public surface that grainfn matches, each checked against Grain 0.2.18."""

from __future__ import annotations

import pytest

import grainfn

pytestmark = pytest.mark.grain


def test_the_migration_guide_lists_every_grain_name_and_grainfn_has_them() -> None:
    import importlib
    import re
    from pathlib import Path

    guide = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-grain.md"
    rows = re.findall(r"^\| `(grain[\w.]*)` \| (.*?) \| (.*?) \|$", guide.read_text(), re.M)
    listed = {module: re.findall(r"`(\w+)`", names) for module, names, _ in rows}
    absent = {"grain": {"monitoring", "proto"}, "grain.proto": {"execution_summary_pb2"}}
    assert set(listed) >= {"grain", "grain.experimental", "grain.python", "grain.transforms"}
    for module in listed:  # a package lists a submodule once it is imported
        importlib.import_module(module)
    for module, names in listed.items():
        theirs = importlib.import_module(module)
        assert names == sorted(n for n in dir(theirs) if not n.startswith("_")), module
        ours = None if module == "grain.proto" else importlib.import_module("grainfn" + module[5:])
        missing = {n for n in names if ours is None or not hasattr(ours, n)}
        assert missing == absent.get(module, set()), module


@pytest.mark.parametrize("next_index", [21, 30, 10**9])
def test_a_next_index_past_the_end_is_an_index_error_like_grain(next_index: int) -> None:
    import grain

    with pytest.raises(IndexError, match=f"next_index` {next_index} is out of range"):
        iter(grain.MapDataset.range(20).to_iter_dataset()).set_state({"next_index": next_index})
    ours = iter(grainfn.MapDataset.range(20).to_iter_dataset())
    with pytest.raises(IndexError, match=f"position is {next_index}, past the end") as error:
        ours.set_state({"next_index": next_index})
    assert isinstance(error.value, ValueError)  # as every state grainfn refuses
    ours.set_state({"next_index": 20})  # the end itself is a position, in both
    assert list(ours) == []
