"""Each facade module reproduces one Grain module and is named after it.

For every public name of `grainfn`, `grainfn.experimental` and
`grainfn.python` that a facade module defines, Grain 0.2.18 has the same name
in the same public module; the Grain module that defines it is the one this
facade module reproduces. Its name is part of that Grain module's path
(`zip` for `grain._src.python.dataset.transformations.zip`, `index_shuffle`
for `...experimental.index_shuffle.python.index_shuffle_module`), and all of a
facade module's names come from that one Grain module. grainfn's own names
(`inspection.py`'s) have no Grain module.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import grainfn

pytestmark = pytest.mark.grain

PUBLIC = ("", ".experimental", ".python")
"""The public modules, after `grainfn` and after `grain`."""

OWN = {"inspection"}
"""Facade modules of grainfn's own, with no Grain module to mirror."""

FACADE = Path(grainfn.__file__).parent / "_src" / "facade"


def module_of(value: Any) -> str:
    """The module that defines `value` (an instance's class's, for an object like `config`)."""
    defined = value if isinstance(value, type) or callable(value) else type(value)
    return str(defined.__module__)


def facade_names() -> Iterator[tuple[str, str, str]]:
    """(facade module, public name, Grain module that defines the same name)."""
    for suffix in PUBLIC:
        ours = importlib.import_module(f"grainfn{suffix}")
        theirs = importlib.import_module(f"grain{suffix}")
        for name in ours.__all__:
            module = module_of(getattr(ours, name))
            if module.startswith("grainfn._src.facade."):
                facade = module.rpartition(".")[2]
                grain_value = getattr(theirs, name, None)
                grain_module = None if grain_value is None else module_of(grain_value)
                yield facade, name, str(grain_module)


def test_each_facade_module_is_named_after_the_one_grain_module_it_reproduces() -> None:
    mirrored: dict[str, set[str]] = {}
    for facade, name, grain_module in facade_names():
        if facade in OWN:
            continue
        assert facade in grain_module.split("."), f"{facade}.{name} is Grain's {grain_module}"
        mirrored.setdefault(facade, set()).add(grain_module)
    several = {facade: modules for facade, modules in mirrored.items() if len(modules) > 1}
    assert not several, f"facade modules holding parts of several Grain modules: {several}"
    modules = {path.stem for path in FACADE.glob("*.py")} - {"__init__"}
    unnamed = modules - set(mirrored) - OWN
    assert not unnamed, f"facade modules with no public name of a Grain module: {unnamed}"


def test_grainfns_own_names_are_not_grains() -> None:
    own = [(name, grain) for facade, name, grain in facade_names() if facade in OWN]
    assert own and all(grain == "None" for _, grain in own), own
