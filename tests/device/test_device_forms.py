"""Each stage holds its device form (or the reason it has none) in its own module.

The docs' table of what runs on device and `to_jax`'s docstring are checked
against the stages themselves, so a stage that gains a device form cannot be
left out of either.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.compiler import NotOnDeviceError
from grainfn._src.core.dataset import Dataset

DOCS = Path(__file__).resolve().parents[2] / "docs" / "jax.md"

SAMPLES: dict[str, Any] = {
    "range": fn.range(4),
    "source": fn.source(np.arange(4, dtype=np.int32)),
    "seed": fn.seed(1, fn.range(4)),
    "shuffle": fn.shuffle(fn.range(4), seed=1),
    "window_shuffle": fn.window_shuffle(2, fn.range(4), seed=1),
    "slice": fn.slice(slice(1, 3), fn.range(4)),
    "repeat": fn.repeat(2, fn.range(4)),
    "mix": fn.mix([fn.range(4), fn.range(4)]),
    "concatenate": fn.concatenate([fn.range(4), fn.range(4)]),
    "select_from_datasets": fn.select_from_datasets([fn.range(4)], [(0, 1)]),
    "map": fn.map(lambda x: x + 1, fn.range(4)),
    "map_with_index": fn.map_with_index(lambda i, x: x + i, fn.range(4)),
    "random_map": fn.random_map(lambda x, key: x, fn.range(4), seed=1, rng="jax"),
    "batch": fn.batch(2, fn.range(4)),
    "filter": fn.filter(lambda x: True, fn.range(4)),
    "flat_map": fn.flat_map(lambda x: [x], fn.range(4), max_fan_out=1),
    "zip": fn.zip([fn.range(4), fn.range(4)]),
}
"""One dataset of each stage kind `grainfn.fn` builds, by the name of its function."""


def table_rows() -> dict[str, str]:
    """The docs' table of what runs on device: each stage name in a row, and its answer."""
    text = DOCS.read_text()
    table = text[text.index("## What runs on device") :].split("\n\n")[1]
    rows = {}
    for line in table.splitlines()[2:]:
        stages, answer = (cell.strip() for cell in line.strip("|").split("|"))
        for name in re.findall(r"`(\w+)`", stages):
            rows[name] = answer
    return rows


def stage_classes() -> set[type]:
    """Every dataset stage kind the samples reach, the samples' own top stages included."""
    kinds: set[type] = set()
    for ds in SAMPLES.values():
        todo = [ds]
        while todo:
            node = todo.pop()
            kinds.add(type(node))
            todo.extend(node.parents)
    return kinds


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_docs_table_says_what_each_stage_does_on_device(name: str) -> None:
    ds, answer = SAMPLES[name], table_rows()[name]
    if ds.has_device_form:
        assert answer.startswith(("yes", "with")), (name, answer)
        fn.to_jax(ds)  # and it compiles
    else:
        assert answer.startswith("no"), (name, answer)
        with pytest.raises(NotOnDeviceError, match=re.escape(type(ds).device_refusal)):
            fn.to_jax(ds)


def test_every_stage_kind_with_a_device_form_is_sampled_documented_and_in_the_docstring() -> None:
    documented = set(table_rows())
    sampled = {type(ds) for ds in SAMPLES.values()}
    for kind in stage_classes():
        if kind.device_program is not Dataset.device_program:
            assert kind in sampled, f"{kind.__name__} has a device form: add it to SAMPLES"
    with_forms = {name for name, ds in SAMPLES.items() if ds.has_device_form}
    assert with_forms <= documented
    docstring = " ".join((fn.to_jax.__doc__ or "").split())
    missing = [name for name in sorted(with_forms) if f"`{name}`" not in docstring]
    assert not missing, f"to_jax's docstring does not name {missing}"


def test_a_stage_without_a_device_form_says_why_in_its_own_class() -> None:
    refusals = {type(SAMPLES[name]).device_refusal for name in ("filter", "flat_map", "zip")}
    assert len(refusals) == 3 and Dataset.device_refusal not in refusals
