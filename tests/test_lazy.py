"""Names imported on first use: `import grainfn` loads no heavy part; each lazy name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import grainfn
from grainfn._src.lazy import reexports

NOT_IMPORTED = (
    # Heavy dependencies, imported where they are used.
    *("jax", "jaxlib", "orbax", "array_record", "tensorstore", "pyarrow", "ray", "grain"),
    # The standard library's heavy parts: worker processes, event loops, OpenSSL.
    *("multiprocessing", "asyncio", "ssl", "hashlib", "cloudpickle"),
    # grainfn's parts most programs never touch: the DataLoader and its samplers, sharding
    # and sources, worker processes, checkpoints, Grain's other public modules, packing,
    # Parquet, element specs, inspection, Ray.
    *("grainfn._src.facade.data_loader", "grainfn._src.loader.samplers"),
    *("grainfn._src.loader.sharding", "grainfn._src.parallel.processes"),
    *("grainfn._src.checkpoint.background", "grainfn._src.checkpoint.files"),
    *("grainfn.samplers", "grainfn.sharding", "grainfn.sources", "grainfn.checkpoint"),
    *("grainfn.experimental", "grainfn.python", "grainfn._src.packing"),
    *("grainfn._src.formats.parquet", "grainfn._src.inspect.element_spec"),
    *("grainfn._src.inspect.tree", "grainfn._src.parallel.ray_pool"),
)
"""Modules that `import grainfn` leaves unloaded (a package stands for its submodules)."""

LAZY_MODULES = tuple(
    f"grainfn.{path.stem}".removesuffix(".__init__")
    for path in sorted(Path(grainfn.__file__).parent.glob("*.py"))
    if "lazy_attributes(" in path.read_text()
)
"""grainfn's public modules with names imported on first use."""


def run_python(code: str) -> list[str]:
    """The lines `code` prints, run in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_import_grainfn_leaves_heavy_and_rarely_used_modules_unloaded() -> None:
    code = (
        "import sys, grainfn\n"
        f"print(sorted(m for m in {NOT_IMPORTED!r}"
        " if any(k == m or k.startswith(m + '.') for k in sys.modules)))"
    )
    assert run_python(code) == ["[]"]


def test_lazy_names_resolve_in_a_fresh_interpreter_and_load_their_module() -> None:
    code = (
        "import sys, grainfn\n"
        "from grainfn import DataLoader, IndexSampler, samplers\n"
        "from grainfn.fn import mp_prefetch\n"
        "print(DataLoader.__name__, samplers.IndexSampler is IndexSampler is grainfn.IndexSampler,"
        " mp_prefetch.__name__, 'grainfn._src.parallel.processes' in sys.modules)\n"
        "print(grainfn.experimental.FirstFitPackIterDataset.__name__,"
        " grainfn.fn.first_fit_pack.__name__, grainfn.describe.__name__,"
        " grainfn.python.MapDataset is grainfn.MapDataset)\n"
        "print('first_fit_pack' in dir(grainfn.fn), 'experimental' in dir(grainfn),"
        " 'DataLoader' in dir(grainfn), 'sources' in grainfn.__all__)"
    )
    assert run_python(code) == [
        "DataLoader True mp_prefetch True",
        "FirstFitPackIterDataset first_fit_pack describe True",
        "True True True True",
    ]


def test_the_public_modules_with_lazy_names_are_found() -> None:
    assert {"grainfn", "grainfn.fn", "grainfn.sources", "grainfn.experimental"} <= set(LAZY_MODULES)


@pytest.mark.parametrize("name", LAZY_MODULES)
def test_each_lazy_name_resolves_to_what_its_import_line_names(name: str) -> None:
    module = importlib.import_module(name)
    _, lazy = reexports(Path(str(module.__file__)).read_text())
    for attribute, (source, original) in lazy.items():
        # The module's own __getattr__, so the lazy path runs even once a name is cached.
        value = module.__getattr__(attribute)
        assert value is getattr(importlib.import_module(source), original), attribute
        assert attribute in dir(module) and attribute in module.__all__, attribute
        assert getattr(module, attribute) is value, attribute


def test_lazy_submodules_resolve_to_the_submodule() -> None:
    public, _ = reexports(Path(grainfn.__file__).read_text())
    submodules = set(grainfn.__all__) - set(public)
    assert {"checkpoint", "samplers", "sharding", "sources"} <= submodules
    for name in submodules:
        value = grainfn.__getattr__(name)
        assert isinstance(value, ModuleType) and value is sys.modules[f"grainfn.{name}"], name
        assert name in dir(grainfn) and name in grainfn.__all__, name


def test_an_unknown_name_is_an_attribute_error_naming_module_and_name() -> None:
    with pytest.raises(AttributeError, match=r"module 'grainfn\.fn' has no attribute 'nope'"):
        _ = grainfn.fn.nope
    with pytest.raises(AttributeError, match=r"module 'grainfn' has no attribute 'nope'"):
        _ = grainfn.nope
