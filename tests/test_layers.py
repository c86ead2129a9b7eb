"""The layout of grainfn/_src: imports point down a layer, and modules stay small.

The order is the one docs/architecture.md describes; a module may import its
own package and any package of a lower layer, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "grainfn"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("lazy", "index", "transforms"),
    ("core",),
    ("stages", "parallel", "packing", "checkpoint"),
    ("formats", "inspect", "device", "elastic"),
    ("fn",),
    ("testing", "loader"),
    ("facade",),
    ("python",),
    ("public",),
    ("demo",),
    ("main",),
)
"""Packages of grainfn/_src, with `fn` (the public functional module), the other public
modules and the command line (`main`), lowest first."""

RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[:2] == ["grainfn", "_src"] and len(parts) > 2:
        return parts[2]
    if parts[:2] == ["grainfn", "fn"]:
        return "fn"
    if parts[:2] == ["grainfn", "__main__"]:
        return "main"
    return "public"


def imports(path: Path) -> list[tuple[int, str]]:
    """The grainfn modules `path` imports (anywhere in it), with their line numbers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in ("grainfn", "grainfn._src"):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
            elif node.module.startswith("grainfn."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("grainfn.")]
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in (ROOT / "_src").iterdir() if p.is_dir() and p.name != "__pycache__"}
    packages |= {p.stem for p in (ROOT / "_src").glob("*.py") if p.stem != "__init__"}
    assert packages <= set(RANK), sorted(packages - set(RANK))


def test_no_import_points_up_a_layer() -> None:
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        source = package_of(module_name(path))
        for line, target in imports(path):
            destination = package_of(target)
            if destination != source and RANK[destination] >= RANK[source]:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert not upward, "\n".join(upward)


MODULE_LINES = 800
"""Modules are sized by concept (a stage's module holds the whole stage: its dataset and
stream forms, its state and its device form), not by a line count; past this many lines a
module is almost surely two concepts."""


def test_no_module_is_longer_than_one_concept() -> None:
    long = {
        str(path.relative_to(ROOT.parent)): lines
        for path in ROOT.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert not long, f"split these modules (one concept each): {long}"
