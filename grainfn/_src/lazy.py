"""Module attributes imported on first use, so `import grainfn` stays fast.

`import grainfn` should cost little more than numpy. The parts most programs
never touch (the DataLoader with its samplers, sharding and sources, worker
processes, packing, Parquet, element specs, inspection, the experimental Grain
classes) are imported the first time one of their names is read.

A public module lists each of its names once, as an import in the `name as
name` form that marks a re-export. Those under `if TYPE_CHECKING:` are the lazy
ones: static tools (type checkers, the docs) see them, and `lazy_attributes`
reads them from the module's source to know where each name lives. Its
`__all__` is made from the same imports.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def lazy_attributes(
    namespace: dict[str, Any], *, submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The `__getattr__`, `__dir__` and `__all__` of a module with names imported on first use.

    Args:
        namespace: The module's `globals()`. Its `name as name` imports are its
            public names, those under `if TYPE_CHECKING:` the lazy ones; a
            name read once is cached in it.
        submodules: Names of the module's own submodules to import on first use.

    Returns:
        `(__getattr__, __dir__, __all__)` for the module to define. `__all__`
        holds the public names (eager and lazy) and the lazy submodules.

    Examples:
        >>> import grainfn.fn
        >>> getattr_, dir_, all_ = lazy_attributes(vars(grainfn.fn))
        >>> getattr_("first_fit_pack").__name__, "first_fit_pack" in all_
        ('first_fit_pack', True)
        >>> getattr_("nope")
        Traceback (most recent call last):
        ...
        AttributeError: module 'grainfn.fn' has no attribute 'nope'
    """
    module = namespace["__name__"]
    public, attributes = reexports(Path(namespace["__file__"]).read_text())
    lazy_modules = {name: f"{module}.{name}" for name in submodules}

    def get_attribute(name: str) -> Any:
        if name in lazy_modules:
            value = importlib.import_module(lazy_modules[name])
        elif name in attributes:
            source, original = attributes[name]
            value = getattr(importlib.import_module(source), original)
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    names = sorted({*public, *lazy_modules})

    def list_attributes() -> list[str]:
        return sorted({*namespace, *attributes, *lazy_modules})

    return get_attribute, list_attributes, names


def reexports(source: str) -> tuple[list[str], dict[str, tuple[str, str]]]:
    r"""A module's `name as name` imports: all their names, and the lazy ones' origins.

    Returns:
        The names in source order, and for those imported under
        `if TYPE_CHECKING:`, name -> (module, name there).

    Examples:
        >>> reexports("from a import b as b, c\nif TYPE_CHECKING:\n    from d import e as e\n")
        (['b', 'e'], {'e': ('d', 'e')})
    """
    names: list[str] = []
    lazy: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        in_block = isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for statement in node.body if isinstance(node, ast.If) else [node]:
            if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                continue
            for alias in statement.names:
                if alias.asname is not None and alias.asname == alias.name:
                    names.append(alias.name)
                    if in_block:
                        lazy[alias.name] = (statement.module, alias.name)
    return names, lazy
