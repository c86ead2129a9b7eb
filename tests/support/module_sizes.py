"""A soft note on long modules, and how many lines of code a module has.

A module is sized by its concept, not by a line count: no check fails on a
module's length (a stage's module holds the whole stage). Past `NOTE_LINES`,
a module is named at the end of the test run, as a prompt to ask whether it
holds one concept or two.
"""

from __future__ import annotations

import ast
from pathlib import Path

NOTE_LINES = 800


def long_modules(root: Path, limit: int = NOTE_LINES) -> list[tuple[str, int]]:
    """The modules under `root` longer than `limit` lines, longest first, with their lengths."""
    found = []
    for path in root.rglob("*.py"):
        with path.open(encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > limit:
            found.append((path.relative_to(root.parent).as_posix(), lines))
    return sorted(found, key=lambda item: -item[1])


def code_lines(path: Path) -> int:
    """The lines of `path` that hold code: not blank, not a comment, not a docstring.

    A docstring is a string standing alone as a statement (a module's, a
    class's, a function's, or an attribute's below it).
    """
    text = path.read_text(encoding="utf-8")
    prose: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            prose.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in prose
    )
