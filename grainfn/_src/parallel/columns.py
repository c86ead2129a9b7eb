"""A block of like elements as columns: one stacked array per array leaf.

A worker sends a block of 1,024 images as 1,024 small arrays: each pickled
on its own, copied through the worker's socket, and unpickled in the parent,
tens of microseconds apiece, which costs more than a cheap map saves. Most
blocks are alike element by element (the same dict keys, the same shapes),
so `Columns.of(block)` stacks each array leaf into one array, written
straight into the block's memory file (`transfer.encode_block`), and the parent
takes its rows: one copy in the worker, one in the parent, whatever the
block holds.

The parent's elements are what the worker's were, value for value and type
for type: plain dicts (keys in their order), tuples, lists and numpy arrays
are rebuilt as such, and any other leaf (a Python int, a string) travels in
the pickle as before. A row under `transfer.INLINE_BYTES` is copied out of
the block, as an array pickled in-band was, so an element kept alone keeps
only its own bytes; a larger row is a view of the block's memory, as a large
array sent out of band was.

A block stays a list of elements when its elements differ in structure,
shape or dtype, when no leaf is a numpy array, or when an array is not a
plain `np.ndarray` (a subclass, an object array, Fortran order), so that
nothing about an element changes in transit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grainfn._src.core import pytree

MAX_DEPTH = 16
"""Elements nested deeper than this travel as they are, not as columns."""

Spec = tuple[Any, ...]
"""The structure of an element: ("dict", keys, specs), ("tuple", specs), ("list",
specs), ("array", shape, dtype) or ("object",): a leaf pickled as it is."""

_OBJECT: Spec = ("object",)


def spec_of(element: Any, leaves: list[Any], depth: int = 0) -> Spec:
    """The structure of `element`, its leaves appended to `leaves` depth first.

    Examples:
        >>> leaves = []
        >>> spec_of({"x": np.zeros((2, 3), np.uint8), "y": 7}, leaves)
        ('dict', ('x', 'y'), (('array', (2, 3), dtype('uint8')), ('object',)))
        >>> len(leaves)
        2
    """
    kind = type(element)
    if kind is np.ndarray:
        leaves.append(element)
        if _stackable(element):
            return ("array", element.shape, element.dtype)
        return _OBJECT
    if depth < MAX_DEPTH:
        if kind is dict:
            keys = tuple(element)
            return ("dict", keys, tuple(spec_of(element[k], leaves, depth + 1) for k in keys))
        if kind is tuple or kind is list:
            return (kind.__name__, tuple(spec_of(x, leaves, depth + 1) for x in element))
    leaves.append(element)
    return _OBJECT


def _stackable(array: np.ndarray) -> bool:
    """Whether rows of a stacked copy give back `array` exactly (type, dtype and order)."""
    if array.dtype.hasobject or not array.nbytes:
        return False
    # An F-ordered array unpickles F-ordered: a row of a stack would be C-ordered.
    return array.flags.c_contiguous or not array.flags.f_contiguous


def _array_leaves(spec: Spec) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    """The (shape, dtype) of each array leaf of `spec`, in leaf order, objects as None."""
    out: list[Any] = []

    def walk(node: Spec) -> None:
        kind = node[0]
        if kind == "array":
            out.append((node[1], node[2]))
        elif kind == "object":
            out.append(None)
        else:
            for child in node[-1]:
                walk(child)

    walk(spec)
    return out


@dataclasses.dataclass(frozen=True)
class Columns:
    """A block as its elements' structure, one stacked array per array leaf, and the other leaves.

    Attributes:
        spec: The structure every element of the block has (`spec_of`).
        count: How many elements.
        arrays: Per array leaf (by its index among the leaves): the leaf of every
            element stacked; in `layout` order, so that each array of a memory
            file is aligned.
        objects: Per other leaf, in leaf order: the leaf of every element.
        inline_bytes: Rows smaller than this are copied out of their array
            when the block is unpacked; larger ones are views of it.
    """

    spec: Spec
    count: int
    arrays: dict[int, np.ndarray]
    objects: tuple[tuple[Any, ...], ...]
    inline_bytes: int

    @staticmethod
    def plan(block: Sequence[Any]) -> tuple[Spec, list[list[Any]]] | None:
        """The block's common structure and its leaves per element; None if not columns.

        None when the block is empty, its elements differ in structure, shape
        or dtype, or no leaf is a stackable array.

        Examples:
            >>> Columns.plan([np.zeros(3), np.ones(3)])[0]
            ('array', (3,), dtype('float64'))
            >>> print(Columns.plan([np.zeros(3), np.ones(4)]), Columns.plan([1, 2]))
            None None
        """
        if not block:
            return None
        first: list[Any] = []
        spec = spec_of(block[0], first)
        if not any(shape is not None for shape in _array_leaves(spec)):
            return None
        rows = [first]
        for element in block[1:]:
            leaves: list[Any] = []
            if spec_of(element, leaves) != spec:
                return None
            rows.append(leaves)
        return spec, rows

    @staticmethod
    def layout(spec: Spec, count: int) -> list[tuple[int, tuple[int, ...], np.dtype[Any]]]:
        """(Leaf index, shape, dtype) of each stacked array of `count` elements, in file order.

        Most aligned first: laid end to end from an aligned start, every
        array then starts aligned for its dtype.

        Examples:
            >>> spec = spec_of((np.zeros(3, np.uint8), np.zeros(2)), [])
            >>> [(leaf, shape, str(dtype)) for leaf, shape, dtype in Columns.layout(spec, 4)]
            [(1, (4, 2), 'float64'), (0, (4, 3), 'uint8')]
        """
        arrays = [
            (leaf, (count, *kind[0]), kind[1])
            for leaf, kind in enumerate(_array_leaves(spec))
            if kind is not None
        ]
        return sorted(arrays, key=lambda array: -array[2].alignment)

    @classmethod
    def stack(
        cls,
        spec: Spec,
        rows: list[list[Any]],
        inline_bytes: int,
        into: Callable[[int, tuple[int, ...], np.dtype[Any]], np.ndarray] | None = None,
    ) -> Columns:
        """The columns of `rows` (leaves per element, from `plan`).

        Args:
            spec: The structure of every element.
            rows: Per element, its leaves in leaf order.
            inline_bytes: See the class.
            into: Makes the array a column is stacked into, from its leaf
                index, shape and dtype (a view of a memory file, say); a new
                array by default.
        """
        arrays = {}
        for leaf, shape, dtype in cls.layout(spec, len(rows)):
            out = np.empty(shape, dtype) if into is None else into(leaf, shape, dtype)
            arrays[leaf] = pytree.stack_into(out, [row[leaf] for row in rows])
        kinds = _array_leaves(spec)
        objects = tuple(
            tuple(row[leaf] for row in rows) for leaf, kind in enumerate(kinds) if kind is None
        )
        return cls(spec, len(rows), arrays, objects, inline_bytes)

    def unpack(self) -> list[Any]:
        """The elements, rebuilt row by row.

        Examples:
            >>> block = [{"x": np.full(2, i), "name": str(i)} for i in range(3)]
            >>> spec, rows = Columns.plan(block)
            >>> Columns.stack(spec, rows, inline_bytes=1024).unpack()[2]
            {'x': array([2, 2]), 'name': '2'}
        """
        columns: list[Any] = []
        objects = iter(self.objects)
        for leaf, kind in enumerate(_array_leaves(self.spec)):
            if kind is None:
                columns.append(next(objects))
                continue
            array = self.arrays[leaf]  # rows as `array[i, ...]`: 0-d rows stay arrays
            if array.nbytes < self.inline_bytes * self.count:
                columns.append([array[i, ...].copy() for i in range(self.count)])
            else:
                columns.append([array[i, ...] for i in range(self.count)])
        if self.spec[0] == "array":  # the common case: each element one array
            return columns[0]
        return [_build(self.spec, iter(leaves)) for leaves in zip(*columns)]


def _build(spec: Spec, leaves: Any) -> Any:
    kind = spec[0]
    if kind == "array" or kind == "object":
        return next(leaves)
    if kind == "dict":
        return {key: _build(child, leaves) for key, child in zip(spec[1], spec[2])}
    children = [_build(child, leaves) for child in spec[1]]
    return tuple(children) if kind == "tuple" else children
