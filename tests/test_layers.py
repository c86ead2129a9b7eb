"""The layout of grainfn/_src: imports point down a layer, and nothing refers up another way.

The order is the one docs/architecture.md describes; a module may import its
own package and any package of a lower layer, never one above. Below the
facade, no module names the facade or Grain's internal paths, unwraps a
facade value by an attribute name of its own (the core's `Wrapper` protocol
and `core_of` do that), or keeps a module global that a layer above sets.
No module changes `sys.path`, and the imports that run form no cycle.
Upward references on their way out are listed with what removes them; a
listed module that no longer refers up fails the check until it is unlisted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support.module_sizes import long_modules

ROOT = Path(__file__).resolve().parents[1] / "grainfn"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("lazy", "index"),
    ("core",),
    ("stages", "parallel", "packing", "checkpoint", "transforms"),
    ("shards",),
    ("formats", "inspect", "device", "elastic"),
    ("fn",),
    ("testing", "loader"),
    ("grain_states",),
    ("facade",),
    ("python",),
    ("public",),
    ("demo",),
    ("main",),
)
"""Packages of grainfn/_src, with `fn` (the public functional module), the other public
modules and the command line (`main`), lowest first."""

RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}

UPPER_PATHS = ("grainfn._src.facade", "grainfn._src.python")
"""The modules of Grain's API: no module below them names them, in code or in a string."""

NAMES_UPPER_PATHS_UNTIL: dict[str, str] = {}
"""Modules below the facade that still name it, each with what removes the name."""

SETS_A_GLOBAL_UNTIL: dict[str, str] = {}
"""Modules below the facade that still keep a global a layer above sets."""


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


def relative(path: Path) -> str:
    return path.relative_to(ROOT.parent).as_posix()


def modules_below_the_facade() -> Iterator[tuple[Path, ast.Module]]:
    """Each module of a layer below the facade's, parsed."""
    for path in sorted(ROOT.rglob("*.py")):
        if RANK[package_of(module_name(path))] < RANK["facade"]:
            yield path, ast.parse(path.read_text())


def only_pending(found: dict[str, list[str]], pending: dict[str, str]) -> None:
    """Fails on a module in `found` that `pending` does not list, and on one it lists in vain."""
    new = [
        f"{path}:{where}" for path in sorted(found) if path not in pending for where in found[path]
    ]
    assert not new, "\n".join(new)
    done = sorted(set(pending) - set(found))
    assert not done, f"these no longer refer up: remove them from the pending list: {done}"


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


def test_no_module_changes_sys_path() -> None:
    """A module may read `sys.path` (a worker copies it), never assign or extend it."""
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if changes_sys_path(node):
                found.setdefault(relative(path), []).append(f"{node.lineno} {ast.unparse(node)}")
    only_pending(found, {})


def changes_sys_path(node: ast.AST) -> bool:
    """Whether `node` assigns to `sys.path` (or an item of it) or calls a method that changes it."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        return any(
            ast.unparse(t.value if isinstance(t, ast.Subscript) else t) == "sys.path"
            for t in targets
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        reads = ("index", "count", "copy", "__contains__", "__iter__", "__len__")
        return ast.unparse(node.func.value) == "sys.path" and node.func.attr not in reads
    if isinstance(node, ast.ImportFrom) and node.module == "sys":
        return any(alias.name == "path" for alias in node.names)  # then changed by another name
    return False


def test_no_module_below_the_facade_names_it() -> None:
    """Neither in code nor in a string (a module path to import, a class to recognise)."""
    found: dict[str, list[str]] = {}
    for path, tree in modules_below_the_facade():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.Attribute):
                text = ast.unparse(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                text = " ".join(target for _, target in imports_of(node))
            else:
                continue
            if any(upper in text for upper in UPPER_PATHS):
                found.setdefault(relative(path), []).append(f"{node.lineno}")
    only_pending(found, NAMES_UPPER_PATHS_UNTIL)


def imports_of(node: ast.Import | ast.ImportFrom) -> list[tuple[int, str]]:
    """The modules (or names of a module) one import statement names."""
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(node.lineno, alias.name) for alias in node.names]


def test_no_module_below_the_facade_unwraps_it_by_name() -> None:
    """`getattr(x, "core")` is the core's `core_of` alone: the `Wrapper` protocol's one reader."""
    found: dict[str, list[str]] = {}
    for path, tree in modules_below_the_facade():
        for function, node in statements(tree):
            where = (relative(path), function)
            if reads_core_by_name(node) and where != ("grainfn/_src/core/arguments.py", "core_of"):
                found.setdefault(relative(path), []).append(f"{node.lineno} in {function}")
    only_pending(found, {})


def reads_core_by_name(node: ast.AST) -> bool:
    """Whether `node` is `getattr(x, "core", ...)` or `hasattr(x, "core")`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "core"
    )


def test_no_module_below_the_facade_keeps_state_set_from_above() -> None:
    """No `global` in the core, nor in a public function of a layer below the facade: what a
    layer above chooses (the instruments of grainfn.config) is passed down as an argument."""
    found: dict[str, list[str]] = {}
    for path, tree in modules_below_the_facade():
        in_core = package_of(module_name(path)) == "core"
        for function, node in statements(tree):
            if isinstance(node, ast.Global) and (in_core or not function.startswith("_")):
                found.setdefault(relative(path), []).append(f"{node.lineno} in {function}")
    only_pending(found, SETS_A_GLOBAL_UNTIL)


def statements(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Every node in `tree`, with the name of the function it is in ("" at module level)."""

    def visit(node: ast.AST, function: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            yield function, child
            is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from visit(child, child.name if is_function else function)

    return visit(tree, "")


def test_package_inits_only_re_export() -> None:
    """A package's `__init__` holds its docstring, imports and `__all__`: no code of its own."""
    holding_code = []
    for path in sorted((ROOT / "_src").rglob("__init__.py")):
        for node in ast.parse(path.read_text()).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            names_all = isinstance(node, ast.Assign) and [
                getattr(target, "id", None) for target in node.targets
            ] == ["__all__"]
            if not (docstring or names_all or isinstance(node, (ast.Import, ast.ImportFrom))):
                holding_code.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not holding_code, f"move this code into a module of the package: {holding_code}"


def test_imports_form_no_cycle() -> None:
    """Imports that run form no cycle: at module level, and in functions too (an import
    put off into a function still points back), all but those under `if TYPE_CHECKING:`."""
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    graph = {name: runtime_imports(path, set(paths)) - {name} for name, path in paths.items()}
    cycles = [" -> ".join(cycle) for cycle in find_cycles(graph)]
    assert not cycles, "\n".join(cycles)


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The grainfn modules `path` imports at run time: anywhere but under `if TYPE_CHECKING:`."""
    found: set[str] = set()
    for node in run_time(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level):
            for _, target in imports_of(node):
                while target and target not in modules:  # `from package import name`
                    target = target.rpartition(".")[0]
                if target:
                    found.add(target)
    return found


def run_time(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the nodes inside it, but for the bodies of `if TYPE_CHECKING:`."""
    yield node
    if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING:
        children: list[ast.AST] = [*node.orelse]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from run_time(child)


TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per strongly connected group of `graph`."""
    cycles: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], node, target])
            elif target not in state:
                visit(target, [*trail, node])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_find_cycles_finds_a_cycle_and_no_other() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_detectors_see_what_they_look_for() -> None:
    def nodes(source: str) -> list[ast.AST]:
        return list(ast.walk(ast.parse(source)))

    for change in (
        "sys.path.insert(0, 'x')",
        "sys.path[:] = []",
        "sys.path += ['x']",
        "sys.path = []",
        "from sys import path",
    ):
        assert any(changes_sys_path(node) for node in nodes(change)), change
    for read in ("paths = list(sys.path)", "sys.path.index('x')", "'x' in sys.path"):
        assert not any(changes_sys_path(node) for node in nodes(read)), read
    assert any(reads_core_by_name(node) for node in nodes("getattr(ds, 'core', ds)"))
    assert not any(reads_core_by_name(node) for node in nodes("getattr(ds, 'parents')"))
    checked = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import grainfn.a\n"
        "def f():\n    import grainfn.b\n"
    )
    imported = {n.names[0].name for n in run_time(checked) if isinstance(n, ast.Import)}
    assert imported == {"grainfn.b"}


def test_long_modules_are_named_longest_first_and_nothing_fails_on_length(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * 10)
    (package / "sub" / "long.py").write_text("x = 1\n" * 12)
    (package / "longer.py").write_text("x = 1\n" * 20)
    assert long_modules(package, limit=11) == [("pkg/longer.py", 20), ("pkg/sub/long.py", 12)]
    assert long_modules(package, limit=20) == []
