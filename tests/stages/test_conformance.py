"""Every stage module's test file declares its conformance examples.

The checks every stage keeps are in `tests/support/conformance.py`; each stage's
test file, `tests/stages/test_<module>.py`, runs them on its own examples
(`test_conforms = conformance.conforms(...)`), so a new stage is its module,
one line of `grainfn/fn.py` and its test file.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

from grainfn._src import stages

HERE = Path(__file__).resolve().parent


def declares_examples(path: Path) -> bool:
    """Whether the module at `path` binds `test_conforms` to `conformance.conforms(...)`."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            call = ast.unparse(node.value.func)
            if names == ["test_conforms"] and call == "conformance.conforms":
                return bool(node.value.args)
    return False


def test_every_stage_module_has_a_test_file_with_conformance_examples() -> None:
    modules = sorted(info.name for info in pkgutil.iter_modules(stages.__path__))
    missing = [m for m in modules if not (HERE / f"test_{m}.py").exists()]
    assert not missing, f"stage modules without a test file: {missing}"
    undeclared = [m for m in modules if not declares_examples(HERE / f"test_{m}.py")]
    assert not undeclared, f"stage test files without conformance examples: {undeclared}"
