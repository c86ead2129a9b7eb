"""A soft note on long modules: a module is sized by its concept, not by a line count.

No check fails on length (a stage's module holds the whole stage). Past
`NOTE_LINES`, a module is named at the end of the test run, as a prompt to
ask whether it holds one concept or two.
"""

from __future__ import annotations

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
