"""Rebuilding a stage of a pipeline with other parents.

Stages are frozen dataclasses that keep their parents in fields, alone
(`parent`) or as a tuple (`components`, ...). Timing a pipeline and handing
its reads to worker processes both rebuild the tree above some stages, with
the same rule: find each parent among the stage's fields, and replace it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.stream import Stream


def with_parents(node: Any, parents: tuple[Any, ...]) -> Any | None:
    """`node` rebuilt to read `parents` in place of `node.parents`; None if it cannot be.

    The parents are found among the node's dataclass fields, alone or as a
    tuple; a stage that keeps its parents elsewhere cannot be rebuilt.

    Examples:
        >>> from grainfn import fn
        >>> with_parents(fn.map(str, fn.range(3)), (fn.range(5),)).length
        5
        >>> with_parents(fn.range(3), ()).length
        3
    """
    old = node.parents
    if not old:
        return node
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return None
    replacement = {id(before): after for before, after in zip(old, parents)}
    changes: dict[str, Any] = {}
    found: set[int] = set()
    for field in dataclasses.fields(node):
        if not field.init:
            continue
        value = getattr(node, field.name)
        if id(value) in replacement and isinstance(value, (Dataset, Stream)):
            changes[field.name] = replacement[id(value)]
            found.add(id(value))
        elif isinstance(value, tuple) and value and all(id(v) in replacement for v in value):
            changes[field.name] = tuple(replacement[id(v)] for v in value)
            found.update(id(v) for v in value)
    if found != set(replacement):
        return None
    return dataclasses.replace(node, **changes)
