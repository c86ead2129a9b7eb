"""Declarations: the hooks a stage may declare, declared once on its base and checked at once.

Every hook of `Stream` and `Dataset` has a row in docs/architecture.md's
table, with its default and its line of doc; a stage class that misspells a
hook, or gives one a value of another type, fails when it is made; and every
stage class of the package is made without one.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import grainfn
from grainfn._src.core import declarations
from grainfn._src.core.dataset import Dataset, IndexStage
from grainfn._src.core.next_index_rule import NextIndexRule
from grainfn._src.core.random_stage import ArgumentKind, RandomStage
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import PassThroughStream, Stream

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
BASES = (Stream, Dataset)


def table_row(hook: declarations.Hook) -> str:
    """The docs' row of `hook`: its name, base, default and line of doc."""
    default = str(hook.default) if isinstance(hook.default, enum.Enum) else repr(hook.default)
    return f"| `{hook.name}` | `{hook.base.__name__}` | `{default}` | {hook.doc} |"


def docs_rows() -> list[str]:
    """The rows of the docs' table of declarations, as written."""
    text = DOCS.read_text()
    table = text[text.index("### The declarations a stage can make") :].split("\n\n")[2]
    return table.splitlines()[2:]


def package_kinds() -> list[type]:
    """Every Stream and Dataset subclass the package defines, each of its modules imported."""
    for module in pkgutil.walk_packages(grainfn.__path__, "grainfn."):
        importlib.import_module(module.name)
    found, todo = set(), list(BASES)
    while todo:
        kind = todo.pop()
        found.add(kind)
        todo += kind.__subclasses__()
    return sorted(
        (kind for kind in found if kind.__module__.startswith("grainfn.")),
        key=lambda kind: (kind.__module__, kind.__qualname__),
    )


def test_the_docs_table_lists_every_hook_of_the_bases_with_its_default_and_doc() -> None:
    expected = [table_row(hook) for base in BASES for hook in declarations.hooks(base)]
    assert docs_rows() == expected


def test_every_hook_has_a_line_of_doc_and_a_default_of_its_type() -> None:
    hooks = [hook for base in BASES for hook in declarations.hooks(base)]
    assert {hook.name for hook in hooks} >= {"spec_rule", "executes_leaves", "makes_holes"}
    for hook in hooks:
        assert hook.doc.endswith("."), hook
        assert declarations.holds(hook.default, hook.allowed), hook


@pytest.mark.parametrize(
    ("base", "name", "meant"),
    [
        (PassThroughStream, "spec_rul", "spec_rule"),
        (PassThroughStream, "grain_stat", "grain_state"),
        (PassThroughStream, "transparant", "transparent"),
        (PassThroughStream, "executes_leave", "executes_leaves"),
        (IndexStage, "makes_hole", "makes_holes"),
        (IndexStage, "device_refusals", "device_refusal"),
    ],
)
def test_a_misspelt_hook_fails_when_the_class_is_made(base: type, name: str, meant: str) -> None:
    with pytest.raises(TypeError) as raised:

        class Misspelt(base):  # type: ignore[valid-type, misc]
            locals()[name] = None

    message = str(raised.value)
    assert f"Misspelt declares {name}, which is no declaration" in message
    assert f"did you mean {meant}?" in message


def test_a_misspelt_field_of_a_dataclass_stage_fails_too() -> None:
    with pytest.raises(TypeError, match=r"Kept declares grain_stat, .* did you mean grain_state"):

        @dataclasses.dataclass(frozen=True)
        class Kept(PassThroughStream):
            grain_stat: int


@pytest.mark.parametrize(
    ("base", "name", "value", "allowed"),
    [
        (PassThroughStream, "spec_rule", "parent", "Stream.spec_rule takes SpecRule"),
        (PassThroughStream, "next_index_rule", "counter", "takes NextIndexRule or None"),
        (PassThroughStream, "random_stage", ("map", ("map",)), "a tuple of RandomStage or None"),
        (PassThroughStream, "transparent", 1, "Stream.transparent takes bool"),
        (IndexStage, "spec_rule", NextIndexRule.PARENT, "Dataset.spec_rule takes SpecRule"),
        (IndexStage, "device_refusal", None, "Dataset.device_refusal takes str"),
    ],
)
def test_a_hook_of_the_wrong_type_fails_when_the_class_is_made(
    base: type, name: str, value: Any, allowed: str
) -> None:
    with pytest.raises(TypeError) as raised:

        class Wrong(base):  # type: ignore[valid-type, misc]
            locals()[name] = value

    message = str(raised.value)
    assert f"Wrong declares {name} = {value!r}, of type {type(value).__name__};" in message
    assert message.endswith(f"{allowed}.")


@pytest.mark.parametrize(
    ("base", "name", "value", "declarer"),
    [
        (PassThroughStream, "makes_holes", True, "Dataset"),
        (PassThroughStream, "device_refusal", "no device", "Dataset"),
        (IndexStage, "next_index_rule", NextIndexRule.PARENT, "Stream"),
        (IndexStage, "executes_leaves", True, "Stream"),
        (IndexStage, "grain_state", None, "Stream"),
    ],
)
def test_a_hook_only_the_other_base_declares_fails_when_the_class_is_made(
    base: type, name: str, value: Any, declarer: str
) -> None:
    with pytest.raises(TypeError) as raised:

        class Crossed(base):  # type: ignore[valid-type, misc]
            locals()[name] = value

    own = "Stream" if issubclass(base, Stream) else "Dataset"
    message = str(raised.value)
    assert f"Crossed declares {name}, a declaration of a {declarer} only:" in message
    assert f"a {own} stage never reads it." in message


def test_a_hook_both_bases_declare_passes_on_either() -> None:
    class Timed(PassThroughStream):
        transparent = True
        spec_rule = SpecRule.PARENT

    class Indexed(IndexStage):
        transparent = True
        spec_rule = SpecRule.PARENT

    assert Timed.transparent and Indexed.transparent


def test_both_bases_make_their_hooks_known_to_the_other() -> None:
    assert set(BASES) <= set(declarations._BASES)


def test_hooks_of_the_right_type_and_other_names_pass() -> None:
    class Declared(PassThroughStream):
        spec_rule = SpecRule.PARENT
        next_index_rule = NextIndexRule.PARENT
        random_stage = RandomStage("take_while", (ArgumentKind.PREDICATE,))
        executes_leaves = True
        trace_parent = None  # 0.78 alike to transparent: a name of its own

    assert Declared.spec_rule is SpecRule.PARENT
    assert Declared.executes_leaves


def test_every_stage_class_of_the_package_declares_its_hooks_rightly() -> None:
    kinds = package_kinds()
    names = {kind.__name__ for kind in kinds}
    assert {"LimitedStream", "PrefetchedStream", "IndexStage", "FilteredDataset"} <= names
    for kind in kinds:
        base = Stream if issubclass(kind, Stream) else Dataset
        declarations.check(kind, base)  # raises where it misdeclares


def test_every_rule_is_declared_by_some_stage_of_the_package() -> None:
    kinds = package_kinds()
    spec_rules = {kind.spec_rule for kind in kinds}
    assert spec_rules == set(SpecRule)
    index_rules = {kind.next_index_rule for kind in kinds if issubclass(kind, Stream)}
    assert index_rules == {*NextIndexRule, None}
