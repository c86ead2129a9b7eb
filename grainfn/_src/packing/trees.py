"""Trees of features: their leaves in order, their paths, and rebuilding them from leaves.

A tree is a nesting of dicts, lists, tuples and namedtuples; anything else is
a leaf. Leaves come in JAX's order (dict keys sorted, sequences in order), and
a rebuilt tree has its dicts' keys sorted, as `jax.tree_util` gives them. A
leaf's path is the tuple of keys and indices that leads to it, written
`['inputs'][0]` in messages. Pack-and-batch packs every leaf of its
`length_struct`; first-fit and best-fit packing pack every leaf of each
top-level feature.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from grainfn._src.core import pytree, validate
from grainfn._src.core import state as records

Path = tuple[Any, ...]
"""The keys and indices from a tree's root to one of its nodes."""


def where(path: Path) -> str:
    """A path as it is written after the tree's name in messages.

    Examples:
        >>> "length_struct" + where(("inputs", 0))
        "length_struct['inputs'][0]"
    """
    return "".join(f"[{key!r}]" for key in path)


def leaf_paths(
    structure: Any, path: Path = (), what: str = "length_struct"
) -> list[tuple[Path, Any]]:
    """The leaves of `structure` with their paths (starting with `path`), in JAX's order.

    Raises:
        TypeError: if a dict's keys cannot be sorted, naming it as `what` and its path.

    Examples:
        >>> leaf_paths({"b": 3, "a": (1, {"y": 2, "x": 4})})
        [(('a', 0), 1), (('a', 1, 'x'), 4), (('a', 1, 'y'), 2), (('b',), 3)]
        >>> leaf_paths({"t": {1: 5, "1": 5}}, what="padding_struct")
        Traceback (most recent call last):
        ...
        TypeError: padding_struct['t'] has keys that cannot be sorted, [1, '1']; ...
    """
    if isinstance(structure, dict):
        try:
            keys = sorted(structure)
        except TypeError:
            raise TypeError(
                f"{what}{where(path)} has keys that cannot be sorted, {list(structure)!r}; "
                "use keys of one type (feature names)."
            ) from None
        return [leaf for key in keys for leaf in leaf_paths(structure[key], (*path, key), what)]
    if isinstance(structure, (list, tuple)):
        return [
            leaf for i, item in enumerate(structure) for leaf in leaf_paths(item, (*path, i), what)
        ]
    return [(path, structure)]


def positive_leaves(structure: Any, path: Path, allowed: str) -> list[tuple[Path, int]]:
    """The leaves of a `length_struct` (part at `path`), each checked to be a positive int.

    Args:
        structure: The tree.
        path: Where it is in `length_struct`.
        allowed: What `length_struct` may be, said in a message about a bad leaf.

    Raises:
        TypeError, ValueError: naming the bad leaf's path and what is allowed.

    Examples:
        >>> positive_leaves({"x": 4, "y": [2]}, ("a",), "")
        [(('a', 'x'), 4), (('a', 'y', 0), 2)]
        >>> positive_leaves({"x": 4, "y": [None]}, ("a",), "a nesting of ints.")
        Traceback (most recent call last):
        ...
        TypeError: length_struct['a']['y'][0] must be a positive int, got None (NoneType); ...
    """
    try:
        paths = leaf_paths(structure, path)
    except RecursionError:
        raise pytree.too_deep(f"length_struct{where(path)}") from None
    out = []
    for leaf, length in paths:
        name = f"length_struct{where(leaf)}"
        if validate.integer_or_none(length) is None:
            raise TypeError(
                f"{name} must be a positive int, got {records.describe_value(length)}; {allowed}"
            )
        out.append((leaf, validate.check_positive_int(length, name, validate.INT32_MAX)))
    return out


def rebuild(structure: Any, leaves: Iterator[Any]) -> Any:
    """`structure` with its leaves taken from `leaves` in order; dicts come out with keys sorted.

    Examples:
        >>> rebuild({"y": 0, "x": [0, 0]}, iter("abc"))
        {'x': ['a', 'b'], 'y': 'c'}
    """
    if isinstance(structure, dict):
        return {key: rebuild(structure[key], leaves) for key in sorted(structure)}
    if isinstance(structure, tuple) and hasattr(type(structure), "_fields"):  # a namedtuple
        return type(structure)(*(rebuild(item, leaves) for item in structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(rebuild(item, leaves) for item in structure)
    return next(leaves)


def collect(
    structure: Any, element: Any, path: Path, found: list[Any], *, exact: bool = True
) -> None:
    """Appends the leaves of `element` at `structure`'s leaves to `found`, checking the structure.

    Args:
        structure: The tree whose structure `element` must have.
        element: The tree to read.
        path: Where `element` is, for messages.
        found: Where its leaves go.
        exact: Whether its dicts must have exactly `structure`'s keys; if False,
            other keys are left out.

    Raises:
        ValueError: naming the path where `element` differs from `structure`.

    Examples:
        >>> found = []
        >>> collect({"x": 0, "y": (0, 0)}, {"y": [1, 2], "x": 3, "z": 4}, (), found, exact=False)
        >>> found
        [3, 1, 2]
        >>> collect({"x": 0, "y": (0, 0)}, {"x": 3, "y": [1]}, ("a",), [])
        Traceback (most recent call last):
        ...
        ValueError: ... at element['a']['y'] expected a sequence of 2, got [1] (list).
    """
    if isinstance(structure, dict):
        if not isinstance(element, Mapping):
            raise mismatch(structure, element, path)
        if exact and len(element) != len(structure):
            raise mismatch(structure, element, path)
        for key in sorted(structure):
            if key not in element:
                raise mismatch(structure, element, path)
            collect(structure[key], element[key], (*path, key), found, exact=exact)
    elif isinstance(structure, (list, tuple)):
        if not isinstance(element, (list, tuple)) or len(element) != len(structure):
            raise mismatch(structure, element, path)
        for i, (item, value) in enumerate(zip(structure, element)):
            collect(item, value, (*path, i), found, exact=exact)
    elif element is None or isinstance(element, Mapping):
        raise mismatch(structure, element, path)
    else:
        found.append(element)


def mismatch(structure: Any, element: Any, path: Path) -> ValueError:
    """The error for an element that differs from `structure` at `path`.

    Examples:
        >>> print(mismatch({"x": 0}, None, ("a",)))  # doctest: +ELLIPSIS
        Elements must have the structure of length_struct: at element['a'] expected a dict ...
    """
    if isinstance(structure, dict):
        wanted = f"a dict with keys {_keys(structure)}"
    else:
        wanted = f"a sequence of {len(structure)}" if isinstance(structure, (list, tuple)) else ""
    got = f"a dict with keys {_keys(element)}" if isinstance(element, Mapping) else ""
    return ValueError(
        f"Elements must have the structure of length_struct: at element{where(path)} expected "
        f"{wanted or 'an array'}, got {got or records.describe_value(element)}."
    )


def _keys(mapping: Mapping[Any, Any]) -> str:
    """The keys of `mapping`, sorted where they can be, as a list."""
    keys = list(mapping)
    with contextlib.suppress(TypeError):  # keys of several types: as they are
        keys = sorted(keys)
    return f"[{', '.join(map(repr, keys))}]"
