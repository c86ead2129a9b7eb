"""Runs Google Grain 0.2.18's own public-API unit tests against Grain and against grainfn.

Usage::

    python tools/grain_suite.py                  # every file in TEST_FILES, one at a time
    python tools/grain_suite.py --json out.json  # also write every result as JSON
    python tools/grain_suite.py -k slice -k zip  # only the files whose path contains a word
    python tools/grain_suite.py --jobs 2         # two files at a time (each runs twice)
    python tools/grain_suite.py --from-json out.json  # print a saved run's report again

Grain's unit tests ship inside its wheel. Nothing of them is copied here: the
script finds the installed files at run time and runs each one twice, each time
in a fresh subprocess, with unittest (absltest's loader, a plain
`unittest.TestResult`):

- **grain**: the test module imported by its own name, exactly as Grain's CI
  would run it;
- **grainfn**: the file's source executed from its installed path, with one
  change: its `import grain...` statements (module level and inside functions)
  go through an importer that serves *mapped modules* instead of Grain's. The
  test module, the mapped modules and the support modules are importable by
  name in the worker processes the tests start (`Finder`), as Grain's test
  module is in its run.

The mapping is thin and mechanical; nothing is written per test:

1. Grain's public modules (`grain`, `grain.python`, `grain.experimental`,
   `grain.transforms`, `grain.samplers`, `grain.sharding`, `grain.sources`,
   `grain.checkpoint`, `grain.constants`, `grain.multiprocessing`) are served
   by grainfn's modules of the same names: `grain.X` is `grainfn.X`.
2. A name of a Grain-internal module (`grain._src.python.dataset.dataset`,
   `...transformations.batch`, ...) is mapped when its object *is* one of
   Grain's public objects: `dataset.MapDataset` is `grain.MapDataset`, so it is
   served as `grainfn.MapDataset`; `transforms.Filter` as
   `grainfn.transforms.Filter`. When grainfn has none of the public names
   Grain gives that object, the name is served as a placeholder that raises
   `MissingPublicNameError`: a grainfn failure (missing surface).
3. A name Grain keeps internal is mapped only if grainfn exports a name
   spelled the same publicly, in the grainfn module that corresponds to the
   Grain public module re-exporting that internal module's classes (e.g.
   `grain._src.core.sharding.even_split` -> `grainfn.sharding.even_split`).
   The run lists every such name it used (in 0.2.18: `even_split` only).
4. Three Grain modules are not under test and are served as Grain's own:
   `grain._src.core.tree_lib` (nested-structure helpers the tests build
   expected values with), `grain._src.core.pytest` (a flag: "running under
   pytest") and `grain.proto` (protobuf message classes), and so is one
   function, `packing_packed_batch.get_non_sequence_meta_features` (a pure
   helper with which `testing_util` computes expected packed rows). One module
   is test code, and is executed under the same mapping as a test file:
   `grain._src.python.dataset.transformations.testing_util` (base test classes
   of the packing tests).
5. Constructor aliases (`ALIASES`): 19 internal dataset classes that Grain's
   own public methods construct from the same arguments (`MapDataset.map` is
   `return MapMapDataset(parent=self, transform=transform)`, `ds[a:b]` and
   `ds.slice` build `SliceMapDataset`, `MapDataset.source` builds
   `SourceMapDataset`, ...). Calling one calls that public method of grainfn
   (`map_ds.MapMapDataset(ds, f)` is `ds.map(f)`); any other use of the class
   (`isinstance`, subclassing, attributes) is an internal name as in rule 6.
   Cases that call an alias are counted, and the totals are also given
   without them ("strict").
6. Every other name (internal classes such as `batch.BatchIterDataset`,
   private helpers, a module reached through another module's namespace such
   as `batch.shared_memory_array`) is served as a placeholder. Creating one is harmless;
   using it (calling, subclassing then instantiating, `isinstance`, reading an
   attribute, `mock.patch.object` on it) records the use and raises
   `GrainInternalNameError`.

**Applicable.** A test case is *applicable* when it ran under Grain without
being skipped and, under grainfn, (i) it used no placeholder of rule 6 (at
module level or while it ran, whatever the outcome: a use caught by the test
still counts), (ii) the source of its test method names no such placeholder
either, reached or not (a test that fails before the line that constructs an
internal class would otherwise count as a grainfn failure; in a parameterized
method this holds for all its cases), and (iii) it did not fail on an
`AttributeError` for a private attribute (`_name`) raised from the test's own
code (or from `mock.patch` on its behalf), i.e. a test reading grainfn
objects' internals. Everything else is *not applicable*, reported per file
with the names involved, and never counted as a failure. A test skipped
under Grain is reported as skipped, not applicable. A test *passes* when
unittest reports success or an expected failure.

**Counting.** Totals are given per test case (each parameterized case
counts); without the slice grid, i.e. without `slice_test.py`, whose three
1,088-case `itertools.product` grids (`test_getitem`, `test_getitem_slice`,
`test_iter`) would otherwise outweigh everything else; and per test method
(a method is applicable if one of its cases is, and passes if all its
applicable cases pass; the classes generated by
`parameterized.parameterized_class` count as their base class).

Every grainfn failure among applicable tests is listed with its exception type
and the first line of its message, grouped into themes by the rules in
`THEMES`.

Notes: `interleave_test.py` ships only an abstract base class, decorated with
`absltest.skipThisClass`, and refers to a concrete `InterleaveIterDatasetTest`
the wheel lacks, so it runs no test as installed; both runs add that subclass,
with an empty body (`CONCRETE_SUBCLASSES`). `data_loader_test.py` needs the
`parameterized` package (PyPI), which Grain's wheel does not depend on;
without it that file is reported as not importable under both runs. Each
file gets `--timeout` seconds per run and each test `--test-timeout` seconds;
a test still running then is reported as failed with `TestTimeoutError`.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import concurrent.futures
import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import types
import unittest
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

TEST_FILES = (
    # Dataset transformations (MapDataset / IterDataset methods and experimental classes).
    "python/dataset/transformations/batch_test.py",
    "python/dataset/transformations/cache_test.py",
    "python/dataset/transformations/filter_test.py",
    "python/dataset/transformations/flatmap_test.py",
    "python/dataset/transformations/interleave_test.py",
    "python/dataset/transformations/limit_test.py",
    "python/dataset/transformations/map_test.py",
    "python/dataset/transformations/mix_test.py",
    "python/dataset/transformations/packing_concat_then_split_test.py",
    "python/dataset/transformations/packing_test.py",
    "python/dataset/transformations/prefetch_autotune_test.py",
    "python/dataset/transformations/prefetch_test.py",
    "python/dataset/transformations/process_prefetch_test.py",
    "python/dataset/transformations/rebatch_test.py",
    "python/dataset/transformations/repeat_test.py",
    "python/dataset/transformations/shuffle_test.py",
    "python/dataset/transformations/slice_test.py",
    "python/dataset/transformations/source_test.py",
    "python/dataset/transformations/zip_test.py",
    # Datasets, options, elastic iterator, file formats.
    "python/dataset/base_test.py",
    "python/dataset/dataset_test.py",
    "python/dataset/elastic_iterator_test.py",
    "python/dataset/sources/parquet_dataset_test.py",
    "python/dataset/sources/tfrecord_dataset_test.py",
    # DataLoader, sources, samplers, legacy operations, options, records.
    "python/data_loader_test.py",
    "python/data_sources_test.py",
    "python/load_test.py",
    "python/operations_test.py",
    "python/options_test.py",
    "python/record_test.py",
    "python/samplers_test.py",
    "python/ipc/shared_memory_array_test.py",
    # grain.experimental extras, transforms and sharding.
    "python/experimental/example_packing/pack_and_batch_test.py",
    "python/experimental/index_shuffle/python/index_shuffle_test.py",
    "core/sharding_test.py",
    "core/transforms_test.py",
)
"""The test files run, relative to Grain's installed `grain/_src`.

Left out: tests of Grain internals with no public face (stats, stats_utils,
tree_lib, traceback_util, monitoring, profiler, parallel, ipc queues,
grain_logging, version and import smoke tests), `autotune_test.py` (one empty
test) and `device_put_test.py` (no test).
"""

CONCRETE_SUBCLASSES = {
    "python/dataset/transformations/interleave_test.py": {
        "InterleaveIterDatasetTest": "_InterleaveIterDatasetTestBase",
    },
}
"""Concrete test classes a file refers to but does not define: name -> its base class."""

SLICE_GRID_FILE = "python/dataset/transformations/slice_test.py"
"""The file left out of the "without the slice grid" totals."""

PUBLIC_MODULES = {
    "grain": "grainfn",
    "grain.transforms": "grainfn.transforms",
    "grain.samplers": "grainfn.samplers",
    "grain.sharding": "grainfn.sharding",
    "grain.sources": "grainfn.sources",
    "grain.checkpoint": "grainfn.checkpoint",
    "grain.constants": "grainfn.constants",
    "grain.multiprocessing": "grainfn.multiprocessing",
    "grain.experimental": "grainfn.experimental",
    "grain.python": "grainfn.python",
    "grain.python.experimental": "grainfn.experimental",
}
"""Grain's public modules and grainfn's, in the order public names are looked up."""

PASS_THROUGH = ("grain._src.core.tree_lib", "grain._src.core.pytest", "grain.proto")
"""Grain modules served as Grain's own: helpers of the tests, not the API under test."""

SUPPORT = ("grain._src.python.dataset.transformations.testing_util",)
"""Grain modules of test code, executed under the mapping like a test file."""

PASS_THROUGH_NAMES = (
    "grain._src.python.dataset.transformations.packing_packed_batch.get_non_sequence_meta_features",
)
"""Single Grain helpers served as Grain's own: testing_util builds expected values with them."""

_T = "grain._src.python.dataset.transformations."
ALIASES: dict[str, tuple[str, str, dict[str, str]]] = {
    # Grain-internal class -> (receiver, public method, renamed arguments). Each is the
    # class that Grain's own public method constructs from the same arguments
    # (grain/_src/python/dataset/dataset.py), so calling it is calling that method.
    _T + "source.SourceMapDataset": ("MapDataset", "source", {}),
    _T + "source.RangeMapDataset": ("MapDataset", "range", {}),
    _T + "mix.MixedMapDataset": (
        "MapDataset",
        "mix",
        {"parents": "datasets", "proportions": "weights"},
    ),
    _T + "mix.ConcatenateMapDataset": ("MapDataset", "concatenate", {"parents": "datasets"}),
    _T + "mix.MixedIterDataset": (
        "IterDataset",
        "mix",
        {"parents": "datasets", "proportions": "weights"},
    ),
    _T + "batch.BatchMapDataset": ("parent", "batch", {}),
    _T + "batch.BatchIterDataset": ("parent", "batch", {}),
    _T + "filter.FilterMapDataset": ("parent", "filter", {}),
    _T + "filter.FilterIterDataset": ("parent", "filter", {}),
    _T + "map.MapMapDataset": ("parent", "map", {}),
    _T + "map.MapIterDataset": ("parent", "map", {}),
    _T + "map.MapWithIndexMapDataset": ("parent", "map_with_index", {}),
    _T + "map.MapWithIndexIterDataset": ("parent", "map_with_index", {}),
    _T + "map.RandomMapMapDataset": ("parent", "random_map", {}),
    _T + "map.RandomMapIterDataset": ("parent", "random_map", {}),
    _T + "shuffle.ShuffleMapDataset": ("parent", "shuffle", {}),
    _T + "slice.SliceMapDataset": ("parent", "slice", {}),
    _T + "repeat.RepeatMapDataset": ("parent", "repeat", {}),
    _T + "prefetch.PrefetchIterDataset": ("parent", "to_iter_dataset", {}),
}
"""Mapping rule 5, constructor aliases: calling one of these internal classes calls the
public method Grain implements with it; any other use of the class stays internal."""

THEMES: tuple[tuple[str, str, str], ...] = (
    # (theme, regex on "ExceptionType: message", regex on the test id)
    ("a public Grain name grainfn lacks", r"^MissingPublicNameError", ""),
    ("timeout", r"^TestTimeoutError", ""),
    ("the file did not import", r"^(ImportError|ModuleNotFoundError|ChildError)", ""),
    ("repr / str text", r"", r"\.test_(repr|str)\b"),
    (
        "missing method, attribute, argument or config option",
        r"^AttributeError|unexpected keyword|Unknown config option|takes \d+ positional|"
        r"missing \d+ required",
        "",
    ),
    (
        "same error, other wording",
        r"does not match|Regex didn't match|Exception message does not match|not found in '",
        "",
    ),
    ("no error or warning where Grain gives one", r"not raised|no logs of level", ""),
    (
        "an error where Grain has none, or another exception type",
        r"^(ValueError|TypeError|KeyError|IndexError|RuntimeError|NotImplementedError)",
        "",
    ),
    ("other elements, order or state", r"^AssertionError", ""),
)
"""Themes of grainfn failures, the first matching rule wins; the rest is 'other'."""


# ---------------------------------------------------------------------------
# The mapping (used in the grainfn child process, and in its worker processes).


class GrainInternalNameError(Exception):
    """A test used a Grain name that the mapping does not serve (not applicable)."""


class MissingPublicNameError(AttributeError):
    """A test used a public Grain name that grainfn does not have (a grainfn failure)."""


class TestTimeoutError(Exception):
    """A test ran longer than `--test-timeout` seconds."""


TOUCHES: list[tuple[str, str]] = []
"""(kind, name) of every placeholder used since the current test started."""

EXTRAS_USED: set[str] = set()
"""Internal Grain names served by a grainfn-only public name (mapping rule 3)."""


class Unmapped:
    """What a test gets for a Grain name that is not mapped: raises when used."""

    def __init__(self, name: str, kind: str, detail: str = "") -> None:
        object.__setattr__(self, "_gs_name", name)
        object.__setattr__(self, "_gs_kind", kind)  # "internal" or "missing"
        object.__setattr__(self, "_gs_detail", detail)

    def _gs_raise(self) -> Exception:
        TOUCHES.append((self._gs_kind, self._gs_name))
        if self._gs_kind == "missing":
            return MissingPublicNameError(
                f"{self._gs_name} is Grain's {self._gs_detail}, which grainfn does not have"
            )
        return GrainInternalNameError(f"{self._gs_name} is Grain-internal: not mapped to grainfn")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise self._gs_raise()

    def __setattr__(self, name: str, value: Any) -> None:
        raise self._gs_raise()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Raises: a test cannot construct or call an unmapped name."""
        raise self._gs_raise()

    def __instancecheck__(self, instance: Any) -> bool:
        raise self._gs_raise()

    def __subclasscheck__(self, subclass: Any) -> bool:
        raise self._gs_raise()

    def __iter__(self) -> Iterator[Any]:
        raise self._gs_raise()

    def __len__(self) -> int:
        raise self._gs_raise()

    def __getitem__(self, key: Any) -> Unmapped:
        return self  # `Name[int]` in a class statement: still a placeholder

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        placeholder = self

        def new(cls: type, *args: Any, **kwargs: Any) -> Any:
            raise placeholder._gs_raise()

        return (type(f"Unmapped_{self._gs_name.rsplit('.', 1)[-1]}", (), {"__new__": new}),)

    def __repr__(self) -> str:
        return f"<unmapped {self._gs_name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Unmapped, (self._gs_name, self._gs_kind, self._gs_detail))


class Alias(Unmapped):
    """An internal Grain class that, called, is the public method Grain builds it in."""

    def __init__(self, name: str, grain_class: type) -> None:
        super().__init__(name, "internal")
        object.__setattr__(self, "_gs_signature", inspect.signature(grain_class))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the public method of grainfn that Grain's public API builds this class in."""
        receiver, method, renames = ALIASES[self._gs_name]
        bound = self._gs_signature.bind(*args, **kwargs)
        arguments = {renames.get(k, k): v for k, v in bound.arguments.items()}
        if receiver == "parent":
            target = getattr(arguments.pop("parent"), method)
        else:
            if method == "mix" and "selection_map" in arguments:
                method = "select_from_datasets"
            import grainfn

            target = getattr(getattr(grainfn, receiver), method)
        TOUCHES.append(("alias", self._gs_name))
        return _call_like(target, arguments)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_alias, (self._gs_name,))


def _alias(name: str) -> Alias:
    module, attr = name.rsplit(".", 1)
    return Alias(name, getattr(importlib.import_module(module), attr))


def _call_like(target: Any, arguments: dict[str, Any]) -> Any:
    """Calls `target` with `arguments` by name, positionally where its signature asks."""
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return target(**arguments)
    args: list[Any] = []
    for parameter in parameters:
        if parameter.kind is not inspect.Parameter.POSITIONAL_ONLY:
            break
        if parameter.name not in arguments:
            break
        args.append(arguments.pop(parameter.name))
    return target(*args, **arguments)


class Mapper:
    """Serves Grain's module names as grainfn-backed module objects (rules 1-6)."""

    def __init__(self) -> None:
        self._public: dict[int, list[tuple[str, str]]] | None = None
        self.builtins = dict(vars(builtins))
        self.builtins["__import__"] = self.import_

    # The public names of Grain, by object identity.
    def public_paths(self, value: Any) -> list[tuple[str, str]]:
        """The (public module, name) pairs under which Grain exports `value`."""
        if self._public is None:
            self._public = {}
            for module_name in PUBLIC_MODULES:
                module = importlib.import_module(module_name)
                for name in dir(module):
                    obj = getattr(module, name)
                    if name.startswith("_") or isinstance(obj, types.ModuleType):
                        continue
                    if isinstance(obj, str | int | float | bool | bytes | tuple | frozenset):
                        continue
                    if obj is None:
                        continue
                    self._public.setdefault(id(obj), []).append((module_name, name))
        return self._public.get(id(value), [])

    def home_modules(self, internal: types.ModuleType) -> list[str]:
        """The public Grain modules that re-export classes or functions defined in `internal`."""
        homes: set[str] = set()
        for obj in vars(internal).values():
            if getattr(obj, "__module__", None) == internal.__name__:
                homes.update(module for module, _ in self.public_paths(obj))
        return [name for name in PUBLIC_MODULES if name in homes]

    # Modules.
    def module(self, grain_name: str) -> types.ModuleType:
        """The module object a test gets for Grain module `grain_name`."""
        if grain_name.startswith(PASS_THROUGH):
            return importlib.import_module(grain_name)
        prefix = SUPPORT_PREFIX if grain_name in SUPPORT else MAPPED_PREFIX
        # Through the import system (FINDER), so that the module is in sys.modules under
        # its own name: worker processes unpickle what refers to it by importing it.
        return importlib.import_module(prefix + grain_name.replace(".", ":"))

    def import_(
        self,
        name: str,
        globals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> Any:
        """`__import__` for code under test: `grain...` names come from the mapping."""
        if level != 0 or not (name == "grain" or name.startswith("grain.")):
            return builtins.__import__(name, globals, locals, fromlist or (), level)
        module = self.module(name)
        if fromlist:
            return module
        return self.module("grain")  # `import grain.a.b` binds `grain`; getattr walks to a.b

    def execute(self, path: Path, module: types.ModuleType) -> None:
        """Executes the Python file at `path` in `module`, under the mapping."""
        module.__file__ = str(path)
        module.__dict__["__builtins__"] = self.builtins
        code = compile(path.read_text(), str(path), "exec")
        exec(code, module.__dict__)

    # Names.
    def resolve(self, grain_name: str, attr: str) -> Any:
        """The value of `attr` of mapped Grain module `grain_name`."""
        real = importlib.import_module(grain_name)
        value = getattr(real, attr, _NOTHING)
        full = f"{grain_name}.{attr}"
        if isinstance(value, types.ModuleType):
            if value.__name__ == full:
                return self.module(full)
            if value.__name__.startswith(PASS_THROUGH):
                return value
            return Unmapped(full, "internal")  # another module, reached through this one
        if value is _NOTHING:
            if importlib.util.find_spec(full) is not None:
                return self.module(full)
            raise AttributeError(f"module {grain_name!r} has no attribute {attr!r}")
        if attr.startswith("_"):
            return Unmapped(full, "internal")
        if full in PASS_THROUGH_NAMES:
            return value
        if full in ALIASES and isinstance(value, type):
            return Alias(full, value)
        if grain_name in PUBLIC_MODULES:
            grainfn_module = importlib.import_module(PUBLIC_MODULES[grain_name])
            if hasattr(grainfn_module, attr):
                return getattr(grainfn_module, attr)
            return Unmapped(full, "missing", f"public {full}")
        paths = self.public_paths(value)
        for public_module, public_name in paths:
            grainfn_module = importlib.import_module(PUBLIC_MODULES[public_module])
            if hasattr(grainfn_module, public_name):
                return getattr(grainfn_module, public_name)
        if paths:
            public = " / ".join(f"{m}.{n}" for m, n in paths)
            return Unmapped(full, "missing", f"public {public}")
        for home in self.home_modules(real):
            grainfn_module = importlib.import_module(PUBLIC_MODULES[home])
            if attr in _public_names(grainfn_module):
                EXTRAS_USED.add(f"{full} -> {PUBLIC_MODULES[home]}.{attr}")
                return getattr(grainfn_module, attr)
        return Unmapped(full, "internal")


_NOTHING = object()
MAPPER = Mapper()


class MappedModule(types.ModuleType):
    """A Grain module as code under test sees it: names resolved by `MAPPER` on first use."""

    def __init__(self, name: str, grain_name: str) -> None:
        # Not Grain's name: pickled, it must not come back as Grain's module.
        super().__init__(name)
        self.__dict__["_gs_grain_name"] = grain_name
        self.__dict__["__path__"] = []  # a package, as far as the import system cares
        real = importlib.util.find_spec(grain_name)
        if real is not None and real.origin:
            self.__dict__["__file__"] = real.origin  # tests find their data beside it

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        value = MAPPER.resolve(self.__dict__["_gs_grain_name"], attr)
        if not isinstance(value, Unmapped):
            self.__dict__[attr] = value
        elif value._gs_kind == "internal" and not isinstance(value, Alias):
            # Read while a test runs (e.g. the target of `mock.patch.object`): the test
            # depends on it. Reads at import time are forgotten when the first test starts.
            TOUCHES.append(("internal-read", value._gs_name))
        return value


TARGET = "grain_suite_target"
"""The name of the test module under grainfn (its file is in $GRAIN_SUITE_TARGET)."""
MAPPED_PREFIX = "grain_suite_mapped:"
SUPPORT_PREFIX = "grain_suite_support:"
TARGET_ENV = "GRAIN_SUITE_TARGET"


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the test module, mapped modules and support modules by their names.

    Installed in the grainfn child and in every process it starts (they import
    this file as their main module), so that they all import those modules the
    same way. Reloading one of them does nothing.
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for the names this finder serves."""
        if fullname == TARGET or fullname.startswith((MAPPED_PREFIX, SUPPORT_PREFIX)):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        """A MappedModule for a mapped Grain module; the default module otherwise."""
        if spec.name.startswith(MAPPED_PREFIX):
            grain_name = spec.name[len(MAPPED_PREFIX) :].replace(":", ".")
            return MappedModule(spec.name, grain_name)
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        """Executes the test or support file under the mapping (once: reloading is a no-op)."""
        if module.__dict__.get("_gs_ready"):
            return
        module.__dict__["_gs_ready"] = True
        if module.__name__ == TARGET:
            MAPPER.execute(Path(os.environ[TARGET_ENV]), module)
        elif module.__name__.startswith(SUPPORT_PREFIX):
            grain_name = module.__name__[len(SUPPORT_PREFIX) :].replace(":", ".")
            MAPPER.execute(_source_path(grain_name), module)


FINDER = Finder()


def _install_finder() -> None:
    """Installs the finder of the importable module `grain_suite` (one per process)."""
    import grain_suite  # this file, by its importable name (its folder is on sys.path)

    if grain_suite.FINDER not in sys.meta_path:
        sys.meta_path.insert(0, grain_suite.FINDER)


def _public_names(module: types.ModuleType) -> set[str]:
    names = getattr(module, "__all__", None) or dir(module)
    return {name for name in names if not name.startswith("_")}


def _grain_src() -> Path:
    spec = importlib.util.find_spec("grain")
    assert spec is not None and spec.origin is not None, "Grain is not installed"
    return Path(spec.origin).parent / "_src"


def _source_path(grain_name: str) -> Path:
    return _grain_src().parent.parent / (grain_name.replace(".", "/") + ".py")


# ---------------------------------------------------------------------------
# The child process: runs one test file in one mode, writes one JSON line per test.


class Result(unittest.TestResult):
    """Writes each test's outcome as a JSON line as soon as it is known."""

    def __init__(self, out: io.TextIOBase, test_file: Path, test_timeout: float) -> None:
        super().__init__()
        self.out = out
        self.test_file = test_file
        self.test_timeout = test_timeout
        self.started = 0.0
        self.record: dict[str, Any] = {}

    def startTest(self, test: unittest.TestCase) -> None:  # noqa: N802 (unittest's names)
        """Starts the test's record and its timer."""
        super().startTest(test)
        TOUCHES.clear()
        self.started = time.perf_counter()
        self.record = {"id": _test_id(test), "method": _method_key(test), "outcome": "pass"}
        signal.alarm(max(1, int(self.test_timeout)))

    def stopTest(self, test: unittest.TestCase) -> None:  # noqa: N802
        """Writes the test's record, with the unmapped names it used."""
        signal.alarm(0)
        super().stopTest(test)
        record = self.record
        record["seconds"] = round(time.perf_counter() - self.started, 3)
        internal = sorted({name for kind, name in TOUCHES if kind.startswith("internal")})
        missing = sorted({name for kind, name in TOUCHES if kind == "missing"})
        if internal:
            record["na"] = "uses Grain-internal " + ", ".join(internal)
        elif record.get("private_attr"):
            record["na"] = "reads private attribute " + record["private_attr"]
        if missing:
            record["missing"] = missing
        aliases = sorted({name for kind, name in TOUCHES if kind == "alias"})
        if aliases:
            record["aliases"] = aliases
        named = _internal_names_in_source(test)
        if named:
            record["names_internal"] = named
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _failure(self, outcome: str, err: Any) -> None:
        if self.record.get("outcome") not in ("pass", None):
            return  # the first failure of a test (tearDown may add more) is the one reported
        exc_type, exc, tb = err
        self.record["outcome"] = outcome
        self.record["exc_type"] = exc_type.__name__
        self.record["exc_module"] = exc_type.__module__
        self.record["message"] = _first_line(str(exc))
        frames = traceback.extract_tb(tb)
        self.record["where"] = _where(frames, self.test_file)
        self.record["traceback"] = "".join(traceback.format_exception(exc_type, exc, tb))[-3000:]
        private = _private_attribute(exc, frames)
        if private:
            self.record["private_attr"] = private

    def addError(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        """Records an error of a test, or of a class or module fixture."""
        super().addError(test, err)
        if isinstance(test, unittest.TestCase):
            self._failure("error", err)
        else:  # setUpClass / setUpModule: an _ErrorHolder, not a test
            internal = sorted({name for kind, name in TOUCHES if kind.startswith("internal")})
            record = {
                "fixture_error": str(test),
                "message": f"{err[0].__name__}: {_first_line(str(err[1]))}",
                "na": ("uses Grain-internal " + ", ".join(internal)) if internal else None,
            }
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        """Records a failed assertion."""
        super().addFailure(test, err)
        self._failure("fail", err)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:  # noqa: N802
        """Records a skip."""
        super().addSkip(test, reason)
        if isinstance(test, unittest.TestCase):
            self.record["outcome"] = "skip"
            self.record["message"] = reason
        else:
            record = {"fixture_skip": str(test), "message": reason}
            self.out.write(json.dumps(record) + "\n")

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        """Records an expected failure (a pass)."""
        super().addExpectedFailure(test, err)
        self.record["outcome"] = "xfail"

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        """Records a test marked as an expected failure that passed (a failure)."""
        super().addUnexpectedSuccess(test)
        self.record["outcome"] = "xpass"
        self.record["exc_type"] = "UnexpectedSuccess"
        self.record["message"] = "a test marked as an expected failure passed"

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:  # noqa: N802
        """Records the first failing subtest as the test's failure."""
        super().addSubTest(test, subtest, err)
        if err is not None:
            failure = issubclass(err[0], test.failureException)
            self._failure("fail" if failure else "error", err)


_SOURCE_NAMES: dict[Any, list[str]] = {}


def _internal_names_in_source(test: unittest.TestCase) -> list[str]:
    """The unmapped Grain-internal names the test method's own source names, run or not."""
    func = _test_function(test)
    if func in _SOURCE_NAMES:
        return _SOURCE_NAMES[func]
    found: set[str] = set()
    namespace = getattr(func, "__globals__", {})
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in ast.walk(tree):
        value: Any = None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = namespace.get(node.value.id)
            if isinstance(module, MappedModule):
                try:
                    value = MAPPER.resolve(module.__dict__["_gs_grain_name"], node.attr)
                except AttributeError:
                    value = None
        elif isinstance(node, ast.Name):
            value = namespace.get(node.id)
        internal = isinstance(value, Unmapped) and value._gs_kind == "internal"
        if internal and not isinstance(value, Alias):
            found.add(value._gs_name)
    _SOURCE_NAMES[func] = sorted(found)
    return _SOURCE_NAMES[func]


def _test_function(test: unittest.TestCase) -> Any:
    """The test method's own function, under parameterized's and mock's wrappers."""
    func = getattr(test, test._testMethodName)
    func = getattr(func, "__func__", func)
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return func


def _first_line(text: str) -> str:
    """The message's first line; with the next two when the first is a bare heading."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if len(lines) > 1 and (len(first) < 40 or first.endswith(":")):
        first = " / ".join(lines[:3])
    return first[:400]


def _where(frames: traceback.StackSummary, test_file: Path) -> str:
    """The innermost frame in test code, and the innermost frame overall."""
    test_frames = [
        f for f in frames if f.filename == str(test_file) or "testing_util" in f.filename
    ]
    parts = []
    if test_frames:
        f = test_frames[-1]
        parts.append(f"{Path(f.filename).name}:{f.lineno} {f.line}")
    if frames and (not test_frames or frames[-1] is not test_frames[-1]):
        f = frames[-1]
        parts.append(f"raised at {_short(f.filename)}:{f.lineno} ({f.name})")
    return " | ".join(parts)


def _short(filename: str) -> str:
    for marker in ("/grainfn/", "/grain/", "/site-packages/", "/lib/python"):
        if marker in filename:
            return filename[filename.index(marker) + 1 :]
    return filename


_PRIVATE = re.compile(r"(?:has no attribute|does not have the attribute) '(_[A-Za-z0-9]\w*)'")


def _private_attribute(exc: BaseException, frames: traceback.StackSummary) -> str | None:
    """The private attribute a test's own code failed to read, if that is the failure."""
    if not isinstance(exc, AttributeError) or isinstance(exc, MissingPublicNameError):
        return None
    match = _PRIVATE.search(str(exc))
    if not match or match.group(1).startswith("__"):
        return None
    inner = [f for f in frames if not f.filename.endswith(("unittest/mock.py", "contextlib.py"))]
    if not inner:
        return None
    last = inner[-1].filename
    is_test_code = last.endswith("_test.py") or "testing_util" in last
    return match.group(1) if is_test_code else None


def _test_id(test: unittest.TestCase) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"


def _method_key(test: unittest.TestCase) -> str:
    cls = type(test)
    class_name = cls.__name__
    base = cls.__bases__[0] if cls.__bases__ else object
    if class_name.startswith(base.__name__ + "_") and not any(
        name.startswith("test") for name in vars(cls)
    ):
        class_name = base.__name__  # parameterized.parameterized_class
    func = _test_function(test)
    return f"{class_name}.{getattr(func, '__name__', test._testMethodName)}"


def _on_alarm(signum: int, frame: Any) -> None:
    raise TestTimeoutError("the test ran longer than --test-timeout seconds")


def child_main(mode: str, rel: str, out_path: str, test_timeout: float) -> int:
    """Runs Grain test file `rel` in `mode` ("grain" or "grainfn"), results to `out_path`."""
    import grain  # Grain's absl flags exist in both runs; the mapping needs its public names
    from absl import flags
    from absl.testing import absltest

    path = _grain_src() / rel
    signal.signal(signal.SIGALRM, _on_alarm)
    with open(out_path, "w") as out:
        try:
            if mode == "grain":
                dotted = "grain._src." + rel[: -len(".py")].replace("/", ".")
                module = importlib.import_module(dotted)
            else:
                module = importlib.import_module(TARGET)
        except BaseException as error:
            internal = sorted({name for kind, name in TOUCHES if kind == "internal"})
            text = "".join(traceback.format_exception(error))
            record = {
                "import_error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}",
                "traceback": text[-3000:],
                "na": ("uses Grain-internal " + ", ".join(internal)) if internal else None,
            }
            out.write(json.dumps(record) + "\n")
            out.close()
            os._exit(0)
        for name, base in CONCRETE_SUBCLASSES.get(rel, {}).items():
            attrs = {"__module__": module.__name__, "__qualname__": name}
            setattr(module, name, type(name, (getattr(module, base),), attrs))
        flags.FLAGS(["grain_suite"], known_only=True)
        if hasattr(module, "setup_module"):
            module.setup_module()
        TOUCHES.clear()
        suite = absltest.TestLoader().loadTestsFromModule(module)
        out.write(json.dumps({"planned": [_test_id(t) for t in _flatten(suite)]}) + "\n")
        out.flush()
        result = Result(out, path, test_timeout)
        suite.run(result)
        if hasattr(module, "teardown_module"):
            module.teardown_module()
        out.write(json.dumps({"extras": sorted(EXTRAS_USED), "done": True}) + "\n")
    del grain
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: leftover worker threads must not hang the run


def _flatten(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


# ---------------------------------------------------------------------------
# The parent: runs every file twice, compares, prints.


@dataclasses.dataclass
class FileRun:
    """One test file's outcome in one mode."""

    tests: dict[str, dict[str, Any]]
    planned: list[str]
    import_error: str | None = None
    import_na: str | None = None
    extras: list[str] = dataclasses.field(default_factory=list)
    fixture_errors: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    fixture_skips: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False


def _finder_at_startup(folder: str) -> str:
    """A folder whose `sitecustomize` installs the finder in every Python process started.

    grainfn's worker processes never run the main module (this file), so they
    install the finder at startup instead: the fork server they come from is
    a new interpreter, which imports `sitecustomize` from the PYTHONPATH.
    """
    site = os.path.join(folder, "site")
    os.mkdir(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as file:
        file.write(
            "import os, sys\n"
            f"if os.environ.get({TARGET_ENV!r}):\n"
            f"    sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
            "    import grain_suite  # installs the finder\n"
        )
    return site


def run_file(mode: str, rel: str, timeout: float, test_timeout: float) -> FileRun:
    """Runs one test file in one mode in a fresh subprocess and reads its results."""
    with tempfile.TemporaryDirectory(prefix=f"grain_suite_{mode}_") as tmp:
        out_path = os.path.join(tmp, "results.jsonl")
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        env = dict(os.environ, TEST_TMPDIR=work, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
        paths = [str(REPO), env.get("PYTHONPATH", "")]
        if mode == "grainfn":
            env[TARGET_ENV] = str(_grain_src() / rel)
            paths.insert(0, _finder_at_startup(tmp))
        env["PYTHONPATH"] = os.pathsep.join(paths).rstrip(":")
        args = [sys.executable, str(Path(__file__).resolve()), "--child", mode, rel, out_path]
        args += ["--test-timeout", str(test_timeout)]
        started = time.perf_counter()
        timed_out = False
        with open(os.path.join(tmp, "log.txt"), "w") as log:
            process = subprocess.Popen(
                args, cwd=work, env=env, stdout=log, stderr=log, start_new_session=True
            )
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(process)
        run = _read_results(out_path)
        run.seconds = time.perf_counter() - started
        run.timed_out = timed_out
        if not run.tests and not run.fixture_skips and run.import_error is None:
            log_text = Path(tmp, "log.txt").read_text()[-2000:]
            reason = "timed out" if timed_out else f"exited with {process.returncode}"
            run.import_error = f"ChildError: the test process {reason}: {log_text.strip()[-300:]}"
        return run


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Ends the child and what it started (its own session), by the child's process group id."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_results(path: str) -> FileRun:
    run = FileRun(tests={}, planned=[])
    if not os.path.exists(path):
        return run
    for line in Path(path).read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
        if "import_error" in record:
            run.import_error = record["import_error"]
            run.import_na = record.get("na")
        elif "planned" in record:
            run.planned = record["planned"]
        elif "extras" in record:
            run.extras = record["extras"]
        elif "fixture_error" in record:
            run.fixture_errors.append(record)
        elif "fixture_skip" in record:
            run.fixture_skips.append(record)
        elif "id" in record:
            run.tests[record["id"]] = record
    return run


@dataclasses.dataclass
class Case:
    """One test case, compared."""

    file: str
    id: str
    method: str
    grain: str  # pass, fail, skip, missing
    grainfn: str  # pass, fail, na
    record: dict[str, Any]
    na: str | None = None

    @property
    def uses_alias(self) -> bool:
        """Whether the case called a constructor alias (mapping rule 5)."""
        return bool(self.record.get("aliases"))

    @property
    def in_slice_grid(self) -> bool:
        """Whether the case is in slice_test.py (the slice grid)."""
        return self.file == SLICE_GRID_FILE


def compare(rel: str, grain: FileRun, grainfn: FileRun) -> list[Case]:
    """Classifies every test of one file (the tests are those Grain's run found)."""
    cases = []
    ids = list(dict.fromkeys([*grain.planned, *grain.tests]))
    for test_id in ids:
        g = grain.tests.get(test_id)
        g_status = "missing" if g is None else _status(g)
        if g is None and _fixture_for(test_id, grain.fixture_skips, "fixture_skip"):
            g_status = "skip"
        method = g["method"] if g else test_id
        f = grainfn.tests.get(test_id)
        if g_status == "skip":
            cases.append(Case(rel, test_id, method, g_status, "skip", f or {}))
            continue
        if grainfn.import_error is not None:
            record = {"exc_type": "ImportError", "message": grainfn.import_error}
            if grainfn.import_na:
                cases.append(Case(rel, test_id, method, g_status, "na", record, grainfn.import_na))
            else:
                record["message"] = "the file did not import: " + grainfn.import_error
                cases.append(Case(rel, test_id, method, g_status, "fail", record))
            continue
        if f is None:
            reason = "timed out" if grainfn.timed_out else "did not run"
            record = {"exc_type": "TestTimeoutError", "message": f"the test file {reason}"}
            fixture = _fixture_for(test_id, grainfn.fixture_errors, "fixture_error")
            if fixture is not None and fixture.get("na"):
                cases.append(Case(rel, test_id, method, g_status, "na", fixture, fixture["na"]))
                continue
            if fixture is not None:
                record = {
                    "exc_type": "FixtureError",
                    "message": f"{fixture['fixture_error']}: {fixture['message']}",
                }
            cases.append(Case(rel, test_id, method, g_status, "fail", record))
            continue
        if f.get("na"):
            cases.append(Case(rel, test_id, method, g_status, "na", f, f["na"]))
            continue
        if f.get("names_internal"):
            na = "names Grain-internal " + ", ".join(f["names_internal"]) + " (not reached)"
            cases.append(Case(rel, test_id, method, g_status, "na", f, na))
            continue
        cases.append(Case(rel, test_id, method, g_status, _status(f), f))
    return cases


def _fixture_for(test_id: str, fixtures: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The setUpClass / setUpModule error or skip that kept a test from running, if any."""
    class_name = test_id.split(".", 1)[0]
    for fixture in fixtures:
        description = fixture[key]
        if description.endswith(f".{class_name})") or "setUpModule" in description:
            return fixture
    return None


def _status(record: dict[str, Any]) -> str:
    outcome = record.get("outcome")
    if outcome in ("pass", "xfail"):
        return "pass"
    if outcome == "skip":
        return "skip"
    return "fail"


def theme(case: Case) -> str:
    """The theme of a grainfn failure, by the first matching rule of THEMES."""
    text = f"{case.record.get('exc_type', '')}: {case.record.get('message', '')}"
    for name, text_rule, id_rule in THEMES:
        if re.search(text_rule, text) and (not id_rule or re.search(id_rule, case.id)):
            return name
    return "other"


def _count(cases: list[Case]) -> tuple[int, int, int, int, int]:
    applicable = [c for c in cases if c.grain != "skip" and c.grainfn != "na"]
    return (
        len(applicable),
        sum(c.grain == "pass" for c in applicable),
        sum(c.grainfn == "pass" for c in applicable),
        sum(c.grainfn == "na" and c.grain != "skip" for c in cases),
        sum(c.grain == "skip" for c in cases),
    )


def _by_method(cases: list[Case]) -> tuple[int, int, int]:
    methods: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in cases:
        if case.grain != "skip" and case.grainfn != "na":
            methods[(case.file, case.method)].append(case)
    grain_ok = sum(all(c.grain == "pass" for c in group) for group in methods.values())
    grainfn_ok = sum(all(c.grainfn == "pass" for c in group) for group in methods.values())
    return len(methods), grain_ok, grainfn_ok


def report(
    cases: list[Case], runs: dict[str, tuple[FileRun, FileRun]], seconds: float
) -> dict[str, Any]:
    """Prints the comparison and returns it as a JSON-able dict."""
    print(f"\nGrain's public-API unit tests: Grain 0.2.18 vs grainfn ({len(runs)} files)\n")
    header = f"{'file':<62} {'applic':>6} {'grain':>6} {'grainfn':>7} {'n/a':>5} {'skip':>5}"
    print(header)
    print("-" * len(header))
    per_file = {}
    for rel in runs:
        file_cases = [c for c in cases if c.file == rel]
        n, g, f, na, skip = _count(file_cases)
        per_file[rel] = {"applicable": n, "grain": g, "grainfn": f, "na": na, "skipped": skip}
        print(f"{rel:<62} {n:>6} {g:>6} {f:>7} {na:>5} {skip:>5}")
    n, g, f, na, skip = _count(cases)
    print("-" * len(header))
    print(f"{'total':<62} {n:>6} {g:>6} {f:>7} {na:>5} {skip:>5}")
    rest = [c for c in cases if not c.in_slice_grid]
    n2, g2, f2, na2, _ = _count(rest)
    grid = n - n2
    methods, g3, f3 = _by_method(cases)
    strict = [c for c in cases if not c.uses_alias]
    n4, g4, f4, _, _ = _count(strict)
    n5, g5, f5, _, _ = _count([c for c in strict if not c.in_slice_grid])
    methods6, g6, f6 = _by_method(strict)
    totals = {
        "cases": {"applicable": n, "grain": g, "grainfn": f, "na": na, "skipped": skip},
        "without_slice_grid": {"applicable": n2, "grain": g2, "grainfn": f2, "na": na2},
        "slice_grid_applicable": grid,
        "methods": {"applicable": methods, "grain": g3, "grainfn": f3},
        "strict": {
            "cases": {"applicable": n4, "grain": g4, "grainfn": f4},
            "without_slice_grid": {"applicable": n5, "grain": g5, "grainfn": f5},
            "methods": {"applicable": methods6, "grain": g6, "grainfn": f6},
        },
    }
    print(
        f"\nAll cases: grainfn passes {f:,} of {n:,} applicable tests, Grain {g:,}"
        f" ({na:,} not applicable, {skip:,} skipped under Grain)."
    )
    print(
        f"Without the slice grid ({grid:,} applicable cases): grainfn {f2:,} of {n2:,},"
        f" Grain {g2:,}."
    )
    print(f"By test method: grainfn {f3:,} of {methods:,}, Grain {g3:,}.")
    print(
        f"Strict (without the {n - n4:,} cases that call a constructor alias): grainfn"
        f" {f4:,} of {n4:,}, Grain {g4:,}; without the slice grid {f5:,} of {n5:,}, Grain"
        f" {g5:,}; by test method {f6:,} of {methods6:,}, Grain {g6:,}."
    )

    print("\nNot applicable (Grain-internal names used), per file:")
    for rel in runs:
        reasons = Counter(
            c.na for c in cases if c.file == rel and c.grainfn == "na" and c.grain != "skip"
        )
        for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
            print(f"  {rel.rsplit('/', 1)[-1]}: {count} x {reason}")
    extras = sorted({e for g_run, f_run in runs.values() for e in f_run.extras})
    if extras:
        print("\ngrainfn-only public names used (mapping rule 3):")
        for extra in extras:
            print(f"  {extra}")

    failures = [c for c in cases if c.grain != "skip" and c.grainfn == "fail"]
    grouped: dict[str, list[Case]] = defaultdict(list)
    for case in failures:
        grouped[theme(case)].append(case)
    print(f"\ngrainfn failures ({len(failures)}), by theme:")
    for name, group in sorted(grouped.items(), key=lambda kv: -len(kv[1])):
        print(f"\n  {name} ({len(group)}):")
        for case in group:
            where = case.record.get("where", "")
            print(
                f"    {case.file.rsplit('/', 1)[-1]}::{case.id}: {case.record.get('exc_type')}:"
                f" {case.record.get('message', '')}"
            )
            if where:
                print(f"        at {where}")
    grain_failures = [c for c in cases if c.grain in ("fail", "missing") and c.grainfn != "na"]
    if grain_failures:
        print(f"\nGrain's own failures among applicable tests ({len(grain_failures)}):")
        for case in grain_failures:
            g_record = runs[case.file][0].tests.get(case.id, {})
            print(
                f"  {case.file.rsplit('/', 1)[-1]}::{case.id}: {g_record.get('exc_type')}:"
                f" {g_record.get('message', '')}"
            )
    for rel, (g_run, f_run) in runs.items():
        for label, run in (("grain", g_run), ("grainfn", f_run)):
            if run.import_error:
                print(f"\n{rel} did not import under {label}: {run.import_error}")
            if run.timed_out:
                print(f"\n{rel} timed out under {label}")
    print(f"\nRun time: {seconds:.0f} s")
    return {
        "per_file": per_file,
        "totals": totals,
        "seconds": seconds,
        "extras": extras,
        "file_seconds": {rel: [g.seconds, f.seconds] for rel, (g, f) in runs.items()},
        "cases": [
            {
                **dataclasses.asdict(c),
                "theme": theme(c) if c.grainfn == "fail" and c.grain != "skip" else None,
            }
            for c in cases
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """The command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every result to this JSON file")
    parser.add_argument("-k", action="append", default=[], help="only files containing this")
    parser.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per file and run")
    parser.add_argument("--test-timeout", type=float, default=300, help="seconds per test")
    parser.add_argument(
        "--from-json", metavar="FILE", help="print the report of a run saved with --json, again"
    )
    parser.add_argument("--child", nargs=3, metavar=("MODE", "FILE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, rel, out_path = args.child
        return child_main(mode, rel, out_path, test_timeout=args.test_timeout)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        runs = {
            rel: (FileRun(**pair["grain"]), FileRun(**pair["grainfn"]))
            for rel, pair in saved["runs"].items()
        }
        cases = [case for rel, (g, f) in runs.items() for case in compare(rel, g, f)]
        report(cases, runs, saved["seconds"])
        return 0
    files = [f for f in TEST_FILES if not args.k or any(word in f for word in args.k)]
    started = time.perf_counter()

    def both(rel: str) -> tuple[FileRun, FileRun]:
        grain = run_file("grain", rel, args.timeout, args.test_timeout)
        grainfn = run_file("grainfn", rel, args.timeout, args.test_timeout)
        print(
            f"{rel}: {len(grain.tests)} tests, grain {grain.seconds:.0f} s,"
            f" grainfn {grainfn.seconds:.0f} s",
            flush=True,
        )
        return grain, grainfn

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(both, files))
    runs = dict(zip(files, results))
    cases = [case for rel, (g, f) in runs.items() for case in compare(rel, g, f)]
    data = report(cases, runs, time.perf_counter() - started)
    if args.json:
        data["runs"] = {
            rel: {"grain": dataclasses.asdict(g), "grainfn": dataclasses.asdict(f)}
            for rel, (g, f) in runs.items()
        }
        Path(args.json).write_text(json.dumps(data, indent=1, default=str))
    return 0


if os.environ.get(TARGET_ENV):
    _install_finder()  # in the grainfn child and the processes it starts

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        # Run from the importable module `grain_suite` (this file's folder is on sys.path),
        # so worker processes can unpickle the mapping's objects by reference.
        import grain_suite

        sys.exit(grain_suite.main())
    sys.exit(main())
