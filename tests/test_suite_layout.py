"""The tests mirror the source: every module under grainfn/_src has a test file at its path.

`grainfn/_src/<package>/<name>.py` is tested in `tests/<package>/test_<name>.py`
(subpackages alike), and `grainfn/_src/<name>.py` in `tests/test_<name>.py`, so
that a module's tests are found, and run, without searching: `pytest
tests/core/test_state.py` is the loop for `core/state.py`. A test file
may hold more than its module's tests (a scenario across modules); it may not
be missing.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "grainfn" / "_src"
TESTS = ROOT / "tests"


def same_path_test(module: Path) -> Path:
    """Where the tests of `module` (a file under grainfn/_src) live.

    Examples:
        >>> same_path_test(SOURCE / "core" / "state.py").relative_to(ROOT).as_posix()
        'tests/core/test_state.py'
        >>> same_path_test(SOURCE / "lazy.py").relative_to(ROOT).as_posix()
        'tests/test_lazy.py'
    """
    relative = module.relative_to(SOURCE)
    return TESTS / relative.parent / f"test_{relative.name}"


def modules() -> list[Path]:
    """Every module under grainfn/_src but the packages' `__init__.py`, in path order."""
    return sorted(path for path in SOURCE.rglob("*.py") if path.name != "__init__.py")


def test_the_rule_finds_the_modules_and_their_test_files() -> None:
    found = {path.relative_to(SOURCE).as_posix() for path in modules()}
    assert {"core/state.py", "formats/array_record/codec.py", "lazy.py"} <= found
    assert not any(name.endswith("__init__.py") for name in found)
    assert same_path_test(SOURCE / "formats" / "array_record" / "codec.py") == (
        TESTS / "formats" / "array_record" / "test_codec.py"
    )


def test_every_module_has_a_test_file_at_its_path() -> None:
    missing = [
        f"grainfn/_src/{module.relative_to(SOURCE).as_posix()} -> "
        f"{same_path_test(module).relative_to(ROOT).as_posix()}"
        for module in modules()
        if not same_path_test(module).is_file()
    ]
    assert not missing, (
        f"{len(missing)} modules have no test file at their path:\n  " + "\n  ".join(missing)
    )


def fast_tests(test_file: Path) -> list[str]:
    """The test functions of `test_file` that the quick loop runs (not marked slow).

    Examples:
        >>> "test_the_rule_finds_the_modules_and_their_test_files" in fast_tests(
        ...     Path(__file__)
        ... )
        True
    """
    tree = ast.parse(test_file.read_text())
    if any(_marks_slow(node) for node in tree.body if isinstance(node, ast.Assign)):
        return []  # a module-level pytestmark = pytest.mark.slow
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            if not any(_marks_slow(decorator) for decorator in node.decorator_list):
                found.append(node.name)
        elif isinstance(node, ast.Assign) and _is_test_name(node):
            found += [target.id for target in node.targets if isinstance(target, ast.Name)]
    return found


def test_every_modules_test_file_keeps_a_fast_test() -> None:
    """`pytest -m "not slow"` runs some test of every module: the quick loop covers them all."""
    only_slow = [
        same_path_test(module).relative_to(ROOT).as_posix()
        for module in modules()
        if same_path_test(module).is_file() and not fast_tests(same_path_test(module))
    ]
    assert not only_slow, (
        "These test files hold only slow tests, so the quick loop misses their module; "
        "give each a fast test of the module's own functions:\n  " + "\n  ".join(only_slow)
    )


def _marks_slow(node: ast.AST) -> bool:
    return "mark.slow" in ast.unparse(node)


def _is_test_name(node: ast.Assign) -> bool:
    """`test_x = conformance.conforms(...)`: a test made by a function call."""
    return any(isinstance(t, ast.Name) and t.id.startswith("test") for t in node.targets)
