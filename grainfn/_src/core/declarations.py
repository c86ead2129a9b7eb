"""The declarations a stage can make: hooks declared once on a base, checked when a stage is made.

A hook is a class attribute of a base (`Stream`, `Dataset`) that the rest of
grainfn reads to know a kind of stage: how `element_spec` infers its elements,
how Grain's state reads it, whether it runs elsewhere. The base declares each
hook once, as an annotated `ClassVar` with its default as value and a
docstring right after it whose first line says what it means:

    spec_rule: ClassVar[SpecRule] = SpecRule.UNKNOWN
    \"\"\"How `grainfn.fn.element_spec` infers this stage's elements.\"\"\"

A stage class declares a hook by setting the attribute. The base's
`__init_subclass__` calls `check` once per class, when the class is made (at
import): a name close to a hook's that is not one (`spec_rul`), a hook set
to a value of another type (a `spec_rule` given a string), or a hook that
only the other base declares (a Dataset stage setting `next_index_rule`, which
only a Stream reads) raises TypeError naming the class. A base makes its hooks
known to that last check with `declares_hooks`. Reading a hook stays a plain
attribute read.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import types
import typing
from typing import Any, TypeVar, cast

B = TypeVar("B", bound=type)

_BASES: list[type] = []
"""The bases whose hooks `check` knows, in the order they were made (`declares_hooks`)."""

_CLOSE = 0.85
"""How alike a name must be to a hook's to be taken for a misspelling of it (difflib's
ratio; `trace_parent` and `transparent`, two names of the package, are 0.78 alike)."""


@dataclasses.dataclass(frozen=True)
class Hook:
    """One declaration a stage may make: a class attribute its base declares.

    Attributes:
        name: The attribute's name.
        base: The class that declares it (`Stream` or `Dataset`).
        allowed: The type its value must have (a union, for `X | None`).
        default: Its value on the base: what a stage that does not declare it has.
        doc: What it means, in one line (the first line of its docstring).

    Examples:
        >>> from grainfn._src.core.stream import Stream
        >>> hook = next(h for h in hooks(Stream) if h.name == "transparent")
        >>> hook.allowed, hook.default
        (<class 'bool'>, False)
    """

    name: str
    base: type
    allowed: Any
    default: Any
    doc: str


def hooks(base: type) -> tuple[Hook, ...]:
    """The hooks `base` declares, in the order it declares them, each with its doc.

    Examples:
        >>> from grainfn._src.core.dataset import Dataset
        >>> [hook.name for hook in hooks(Dataset)][:2]
        ['makes_holes', 'elementwise']
    """
    docs = _docs(base)
    return tuple(
        Hook(name, base, allowed, vars(base)[name], docs.get(name, ""))
        for name, allowed in _allowed(base).items()
    )


def declares_hooks(base: B) -> B:
    """Makes the hooks of `base` known to `check` of every other base's stages; returns `base`.

    A class decorator of the bases (`Stream`, `Dataset`): a stage of one base
    that sets a hook only another base declares fails when it is made.

    Examples:
        >>> from grainfn._src.core.dataset import IndexStage
        >>> from grainfn._src.core.stream import Stream  # the other base, made known
        >>> class Crossed(IndexStage):
        ...     next_index_rule = None
        Traceback (most recent call last):
        ...
        TypeError: Crossed declares next_index_rule, a declaration of a Stream only: a Dataset ...
    """
    if base not in _BASES:
        _BASES.append(base)
    return base


def check(kind: type, base: type) -> None:
    """Raises TypeError where the class `kind` misdeclares a hook of its base `base`.

    Each attribute `kind` sets itself is checked: a hook must hold a value of
    its type, a name that is not a hook must not be close to one, and it must
    not be a hook that only another base (`declares_hooks`) declares.

    Raises:
        TypeError: naming `kind`, the attribute and what is allowed (or the
            base that declares it).

    Examples:
        >>> from grainfn._src.core.stream import Stream
        >>> class Spelt:  # what a subclass of Stream would set
        ...     spec_rul = None
        >>> check(Spelt, Stream)
        Traceback (most recent call last):
        ...
        TypeError: Spelt declares spec_rul, which is no declaration of a Stream; did you mean ...
    """
    allowed = _allowed(base)
    own = vars(kind)
    for name in (*own, *own.get("__annotations__", ())):
        if name in allowed:
            if name in own and not holds(own[name], allowed[name]):
                raise TypeError(
                    f"{kind.__qualname__} declares {name} = {own[name]!r}, of type "
                    f"{type(own[name]).__name__}; {base.__name__}.{name} takes "
                    f"{type_name(allowed[name])}."
                )
        elif not name.startswith("__"):
            declarer = _declarer(name, kind, base)
            if declarer is not None:
                raise TypeError(
                    f"{kind.__qualname__} declares {name}, a declaration of a "
                    f"{declarer.__name__} only: a {base.__name__} stage never reads it. The "
                    f"declarations of a {base.__name__} are {', '.join(allowed)}."
                )
            meant = _misspelt(name, tuple(allowed))
            if meant is not None:
                raise TypeError(
                    f"{kind.__qualname__} declares {name}, which is no declaration of a "
                    f"{base.__name__}; did you mean {meant}? The declarations of a "
                    f"{base.__name__} are {', '.join(allowed)}."
                )


def holds(value: Any, allowed: Any) -> bool:
    """Whether `value` has the type `allowed`: a class, a union, or `tuple[X, ...]`.

    Examples:
        >>> holds((1, 2), tuple[int, ...]), holds((1, "2"), int | tuple[int, ...])
        (True, False)
    """
    if isinstance(allowed, types.UnionType) or typing.get_origin(allowed) is typing.Union:
        return any(holds(value, member) for member in typing.get_args(allowed))
    if typing.get_origin(allowed) is tuple:
        (member, _) = typing.get_args(allowed)
        return isinstance(value, tuple) and all(holds(item, member) for item in value)
    return isinstance(value, allowed)


def type_name(allowed: Any) -> str:
    """`allowed`, a type or a union of types, as a message names it.

    Examples:
        >>> type_name(int | None)
        'int or None'
    """
    if isinstance(allowed, types.UnionType) or typing.get_origin(allowed) is typing.Union:
        return " or ".join(type_name(member) for member in typing.get_args(allowed))
    if typing.get_origin(allowed) is tuple:
        return f"a tuple of {type_name(typing.get_args(allowed)[0])}"
    return "None" if allowed is type(None) else allowed.__qualname__


@functools.cache
def _allowed(base: type) -> dict[str, Any]:
    """The hooks of `base` (its own annotated ClassVars), each with the type it allows."""
    own = vars(base).get("__annotations__", {})
    hints = typing.get_type_hints(base)
    return {
        name: typing.get_args(hints[name])[0]
        for name in own
        if typing.get_origin(hints[name]) is typing.ClassVar
    }


def _declarer(name: str, kind: type, base: type) -> type | None:
    """The other base (not one `kind` derives from) that declares the hook `name`, if any."""
    for other in _BASES:
        if other is not base and not issubclass(kind, other) and name in _allowed(other):
            return other
    return None


@functools.cache
def _misspelt(name: str, names: tuple[str, ...]) -> str | None:
    """The one of `names` that `name` is a misspelling of, if any."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=_CLOSE)
    return close[0] if close else None


def _docs(base: type) -> dict[str, str]:
    """The first line of the docstring after each annotated attribute of `base`'s source."""
    body = cast(ast.ClassDef, ast.parse(inspect.getsource(base)).body[0])
    docs = {}
    for statement, after in zip(body.body, body.body[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(after.value.value).splitlines()[0]
    return docs
