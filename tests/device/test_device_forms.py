"""Each stage holds its device form (or the reason it has none) in its own module.

The stages come from the registry: every dataset stage that declares
`random_stage` is sampled from its declaration (a head, such as mix, over
ranges), those the random pipelines do not draw (select_from_datasets, zip)
too, and the leaves of specs, which have a device form but no declaration,
are listed in `UNDRAWN`, each with its reason; a
test keeps that list equal to the stage kinds it must hold. The docs' table
of what runs on device and `to_jax`'s docstring are checked against the
stages themselves, so a stage that gains a device form cannot be left out of
either.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, find, settings
from hypothesis import strategies as st

from grainfn import fn
from grainfn._src.core.compiler import NotOnDeviceError
from grainfn._src.core.dataset import Dataset, dataset_kinds
from grainfn._src.core.random_stage import RandomStage
from grainfn._src.testing.device_specs import DEVICE
from grainfn._src.testing.specs import (
    INTEGERS,
    Functions,
    build_dataset,
    declared_heads,
    declared_kinds,
    declared_stages,
    sample_head,
    sample_op,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "jax.md"

UNDRAWN: dict[str, tuple[Dataset[Any], str]] = {
    "range": (fn.range(4), "a leaf of specs: the grammar of specs draws it, not a declaration"),
    "source": (
        fn.source(np.arange(4, dtype=np.int32)),
        "a leaf of the device specs (device_source): rows of a dtype, not arguments",
    ),
}
"""The stage kinds with a device form that declare no `random_stage`: a sample of each,
by its function, and why. `range` and `source` are the leaves of specs, which stages and
heads (mix, concatenate, select_from_datasets: declared) build on."""

REFUSED: dict[str, Dataset[Any]] = {
    "flat_map": fn.flat_map(lambda x: [x], fn.range(4), max_fan_out=1),
}
"""Stage kinds without a device form that declare no `random_stage`, whose refusals are
checked here with the declared ones' (filter, zip)."""


def drawn_sample(stage: RandomStage, functions: Functions) -> Dataset[Any]:
    """The stage of its simplest spec, over a seeded range (so a seed may be left to it).

    The simplest spec is the first hypothesis draws (a seed of 0, no seed, ...);
    a head's is of one seeded range.
    """
    seeded = (("range", 4), ("seed", 1))

    def draws(draw: Any) -> tuple[Any, ...]:
        if stage.combines:
            return sample_head(draw, {stage.name: stage}, st.just(seeded), functions)
        return sample_op(draw, {stage.name: stage}, functions)

    op = find(
        st.composite(draws)(), bool, settings=settings(database=None, phases=[Phase.generate])
    )
    return build_dataset((op,) if stage.combines else (*seeded, op), functions)


def declared_samples() -> dict[str, tuple[str, Dataset[Any]]]:
    """A sample of each declared dataset stage, by its name: `(its function, the dataset)`.

    A stage with a device form is drawn as the device pipelines draw it, any
    other as the host pipelines do; those that random pipelines leave out
    (`RandomStage.drawn`) too.
    """
    on_device = {
        **declared_kinds(DEVICE, "dataset", on_device=True, undrawn=True),
        **declared_heads(DEVICE, "dataset", on_device=True, undrawn=True),
    }
    samples = {}
    for kind, stage in declared_stages("dataset"):
        if stage.name in on_device:
            samples[stage.name] = (stage.function, drawn_sample(stage, DEVICE))
        elif kind.device_program is Dataset.device_program:
            samples[stage.name] = (stage.function, drawn_sample(stage, INTEGERS))
    return samples


DECLARED = declared_samples()
SAMPLES = {
    **DECLARED,
    **{name: (name, ds) for name, (ds, _) in UNDRAWN.items()},
    **{name: (name, ds) for name, ds in REFUSED.items()},
}
"""Every sample, by name: `(its function in grainfn.fn, the dataset)`."""


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


def device_kinds() -> set[type]:
    """Every dataset stage kind of grainfn with a device form."""
    return {kind for kind in dataset_kinds() if kind.device_program is not Dataset.device_program}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_docs_table_says_what_each_stage_does_on_device(name: str) -> None:
    function, ds = SAMPLES[name]
    answer = table_rows()[function]
    if ds.has_device_form:
        assert answer.startswith(("yes", "with")), (name, answer)
        fn.to_jax(ds)  # and it compiles
    else:
        assert answer.startswith("no"), (name, answer)
        with pytest.raises(NotOnDeviceError, match=re.escape(type(ds).device_refusal)):
            fn.to_jax(ds)


def test_every_stage_kind_with_a_device_form_is_drawn_or_listed_undrawn() -> None:
    drawn = {type(ds) for _, ds in DECLARED.values() if ds.has_device_form}
    undrawn = {type(ds) for ds, _ in UNDRAWN.values()}
    missing = sorted(kind.__name__ for kind in device_kinds() - drawn - undrawn)
    assert not missing, f"{missing} have a device form: declare random_stage, or add to UNDRAWN"
    assert undrawn <= device_kinds(), f"UNDRAWN holds stages without a device form: {undrawn}"
    assert not drawn & undrawn, f"declared, so not UNDRAWN: {drawn & undrawn}"
    assert all(reason for _, reason in UNDRAWN.values())


def test_every_declared_stage_with_a_device_form_is_sampled_as_the_device_pipelines_draw() -> None:
    declared = {kind for kind, _ in declared_stages("dataset")}
    drawn = {type(ds) for _, ds in DECLARED.values() if ds.has_device_form}
    assert declared & device_kinds() == drawn


def test_every_stage_kind_with_a_device_form_is_documented_and_in_the_docstring() -> None:
    documented = set(table_rows())
    with_forms = {function for function, ds in SAMPLES.values() if ds.has_device_form}
    assert with_forms <= documented
    docstring = " ".join((fn.to_jax.__doc__ or "").split())
    missing = [name for name in sorted(with_forms) if f"`{name}`" not in docstring]
    assert not missing, f"to_jax's docstring does not name {missing}"


def test_a_stage_without_a_device_form_says_why_in_its_own_class() -> None:
    refused = {type(ds) for _, ds in SAMPLES.values() if not ds.has_device_form}
    names = {kind.__name__ for kind in refused}
    assert names >= {"FilteredDataset", "FlatMappedDataset", "ZippedDataset"}
    refusals = {kind.device_refusal for kind in refused}
    assert len(refusals) == len(refused) and Dataset.device_refusal not in refusals
