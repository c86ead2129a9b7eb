r"""A griffe extension for grainfn's API reference (loaded by mkdocstrings, see mkdocs.yml).

It does three things while griffe reads the sources:

- a public module of grainfn builds its `__all__` from its imports at run time
  (see `grainfn._src.lazy`), which griffe cannot evaluate statically; the
  module's exports are set to the names its `__all__` holds when imported.

- a function decorated with `toolz.curry` (the combinators of `grainfn.fn`)
  gets the label `curried` beside its signature. griffe reads the source
  statically, so such a function is already a function with its own signature
  and docstring; the label says it may be called without its data argument.
- a doctest written in a docstring's free text (not under `Examples:`) is put
  in a `pycon` code fence. Markdown would otherwise join its lines into one
  paragraph and read an output such as `[[0, 1], [2]]` as a link.

>>> fence_doctests("Text.\n>>> 1 + 1\n2\n\nMore.").splitlines()
['Text.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
"""

from __future__ import annotations

import importlib
from typing import Any

import griffe

CURRY_DECORATORS = frozenset({"toolz.curry", "curry", "toolz.functoolz.curry"})


def fence_doctests(text: str) -> str:
    """Wraps each run of doctest lines that starts at column 0 in a `pycon` fence.

    A run starts at a `>>> ` line and ends at the first blank line, as in
    doctest. Lines inside an existing fence, and indented doctests (those under
    a section such as `Examples:`, which griffe renders itself), are left alone.

    Args:
        text: a docstring's text, already dedented.

    Returns:
        The text with the doctest runs fenced.
    """
    out: list[str] = []
    in_fence = False
    in_doctest = False
    for line in text.splitlines():
        if in_doctest:
            if line.strip():
                out.append(line)
                continue
            out.append("```")
            in_doctest = False
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith(">>>"):
            if out and out[-1].strip():
                out.append("")
            out.extend(["```pycon", line])
            in_doctest = True
            continue
        out.append(line)
    if in_doctest:
        out.append("```")
    return "\n".join(out)


def functions_first(module: Any, names: list[str]) -> list[str]:
    """`names` with the module's functions (the combinators) before its classes (the records).

    A page that orders members by `__all__` then lists what users call first.

    >>> import types
    >>> functions_first(types.SimpleNamespace(A=int, f=len), ["A", "f"])
    ['f', 'A']
    """
    classes = [name for name in names if isinstance(getattr(module, name, None), type)]
    return [name for name in names if name not in classes] + classes


class GrainfnDocs(griffe.Extension):
    """Sets computed exports, labels curried functions and fences free-text doctests."""

    def on_module_members(self, *, mod: griffe.Module, **kwargs: Any) -> None:
        """Sets the exports of a grainfn module whose `__all__` is computed at import."""
        if mod.path.split(".")[0] == "grainfn" and not mod.path.startswith("grainfn._src"):
            module = importlib.import_module(mod.path)
            exports = getattr(module, "__all__", None)
            if exports is not None:
                mod.exports = functions_first(module, exports)

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Fences the doctests in the free text of `obj`'s docstring."""
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        """Adds the label `curried` to a function decorated with `toolz.curry`."""
        if any(str(d.value) in CURRY_DECORATORS for d in func.decorators):
            func.labels.add("curried")
