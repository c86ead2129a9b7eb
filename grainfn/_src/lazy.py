"""Module attributes imported on first use, so `import grainfn` stays fast.

`import grainfn` should cost little more than numpy. The parts most programs
never touch (packing, Parquet, element specs, inspection, the experimental
Grain classes) are listed by name and imported the first time a name is read.
Static tools still see them: each module also imports them under
`typing.TYPE_CHECKING`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    module: str,
    namespace: dict[str, Any],
    *,
    attributes: Mapping[str, str] = {},
    submodules: Mapping[str, str] = {},
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a module with attributes imported on first use.

    Args:
        module: The module's name, for the error of an unknown attribute.
        namespace: The module's `globals()`: a name read once is cached there.
        attributes: Each lazy attribute's name and the module that defines it.
        submodules: Each lazy submodule's name and its full module name.

    Returns:
        `(__getattr__, __dir__)` for the module to define.

    Examples:
        >>> namespace = {}
        >>> getattr_, dir_ = lazy_attributes(
        ...     "demo", namespace, attributes={"sqrt": "math"}, submodules={"path": "os.path"})
        >>> getattr_("sqrt")(9.0), "sqrt" in namespace, getattr_("path").__name__
        (3.0, True, 'posixpath')
        >>> getattr_("cbrt")
        Traceback (most recent call last):
        ...
        AttributeError: module 'demo' has no attribute 'cbrt'
    """

    def get_attribute(name: str) -> Any:
        if name in submodules:
            value = importlib.import_module(submodules[name])
        elif name in attributes:
            value = getattr(importlib.import_module(attributes[name]), name)
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def list_attributes() -> list[str]:
        return sorted({*namespace, *attributes, *submodules})

    return get_attribute, list_attributes
