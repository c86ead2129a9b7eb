"""Behaviours of Grain's public surface that grainfn matches, each checked against Grain 0.2.18."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

import grainfn

pytestmark = pytest.mark.grain


def add_draw(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.integers(1000)


@pytest.mark.parametrize("seed", [893_247_023_984, 2**64 - 1, 2**64 + 5])
def test_random_map_takes_any_seed_grain_takes_with_the_same_draws(seed: int) -> None:
    import grain

    ours = grainfn.MapDataset.range(8).random_map(add_draw, seed=seed)
    theirs = grain.MapDataset.range(8).random_map(add_draw, seed=seed)
    assert [int(ours[i]) for i in range(12)] == [int(theirs[i]) for i in range(12)]
    ours_iter = grainfn.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    theirs_iter = grain.MapDataset.range(8).to_iter_dataset().random_map(add_draw, seed=seed)
    assert [int(x) for x in ours_iter] == [int(x) for x in theirs_iter]


def test_negative_random_map_seeds_are_refused_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(3).random_map(add_draw, seed=-1)[0]
    with pytest.raises(ValueError, match="random_map seed must be an integer >= 0, got -1"):
        grainfn.MapDataset.range(3).random_map(add_draw, seed=-1)


def test_slice_of_an_integer_is_a_value_error_like_grain() -> None:
    import grain

    with pytest.raises(ValueError):
        grain.MapDataset.range(10).slice(5)
    with pytest.raises(ValueError, match=r"takes a Python slice, got 5; ds\[i\] reads one"):
        grainfn.MapDataset.range(10).slice(5)


def test_read_options_warn_when_the_buffer_is_smaller_than_the_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="grainfn"):
        grainfn.ReadOptions(num_threads=8, prefetch_buffer_size=4)
        grainfn.ReadOptions(num_threads=8, prefetch_buffer_size=0)  # read-ahead off: no warning
        grainfn.ReadOptions(num_threads=4, prefetch_buffer_size=4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "grainfn"]
    assert len(warnings) == 1
    assert "prefetch_buffer_size=4 is below num_threads=8" in warnings[0]


def test_a_subclass_keeps_its_parent_objects_like_grain() -> None:
    import grain

    for lib in (grain, grainfn):

        class Doubled(lib.MapDataset):  # type: ignore[name-defined,misc]
            def __init__(self, parent: Any) -> None:
                super().__init__(parent)

            def __len__(self) -> int:
                return len(self._parent)

            def __getitem__(self, index: int) -> Any:
                return self._parent[index] * 2

        parent = lib.MapDataset.range(4)
        doubled = Doubled(parent)
        assert doubled.parents[0] is parent
        assert [doubled[i] for i in range(4)] == [0, 2, 4, 6]
        assert list(doubled.map(lambda x: x + 1)) == [1, 3, 5, 7]


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
