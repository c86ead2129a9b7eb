"""Batching of pytrees: stacking elements leaf by leaf along a new first axis.

A pytree here is a dict, list, tuple or namedtuple nesting of leaves; None
is an empty subtree (as in JAX) and anything else is a leaf. jax is not
needed: elements are plain Python and numpy values.
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_SCALARS = (int, float, bool, complex, np.generic)
_NODES = (dict, list, tuple, type(None))
_PLAIN_LEAVES = (np.ndarray, str, bytes, *_SCALARS)  # leaves JAX never registers as nodes


class StructureError(ValueError):
    """Elements of a batch that differ in structure (`stack` names the path where)."""


def stack(elements: Sequence[Any], *, strict: bool = False) -> Any:
    """Stacks a non-empty sequence of same-structure pytrees leaf by leaf.

    Args:
        elements: Elements with the same structure whose leaves have equal shapes.
        strict: Also refuse a leaf where another element has a subtree. By
            default such leaves are stacked into a numpy object array, as
            Grain's batch does; Grain's legacy `BatchOperation` refuses them.

    Returns:
        One pytree of that structure whose leaves are numpy arrays with a new
        leading axis of size `len(elements)`.

    Raises:
        StructureError: (a ValueError) if the elements differ in structure; the
            message names the path where.
        ValueError: if they differ in a leaf's shape; the message names the leaf;
            or if an element nests too deep or contains itself (`too_deep`).

    Examples:
        >>> stack([{"x": 1, "y": (2.0, 3)}, {"x": 4, "y": (5.0, 6)}])
        {'x': array([1, 4]), 'y': (array([2., 5.]), array([3, 6]))}
        >>> stack([1, {"a": 2}])
        array([1, {'a': 2}], dtype=object)
        >>> stack([1, {"a": 2}], strict=True)
        Traceback (most recent call last):
        ...
        grainfn._src.core.pytree.StructureError: Cannot batch elements of different structure at
        the top level: element 0 is a leaf of type int but element 1 is a dict with keys ['a'].
    """
    if not elements:
        raise ValueError(
            "Cannot stack an empty sequence of elements: a batch needs at least one. "
            "Stack a non-empty list (batch sizes are >= 1)."
        )
    try:
        return _stack_at(elements, "", strict)
    except RecursionError:
        raise too_deep("An element to batch") from None


def stack_runs(elements: Sequence[Any], sizes: np.ndarray) -> list[Any]:
    """`stack` of each run of consecutive elements, the runs having the given sizes.

    Elements that are all numbers of one type, or all arrays of one dtype and
    shape, are stacked in one numpy call and cut into runs (views of one
    array), which gives the same arrays as stacking each run alone.

    Examples:
        >>> stack_runs([1, 2, 3, 4, 5], np.array([2, 2, 1]))
        [array([1, 2]), array([3, 4]), array([5])]
    """
    array = _stack_uniform(elements)
    if array is not None:
        return split_rows(array, sizes)
    ends = np.cumsum(sizes).tolist()
    return [stack(elements[e - s : e]) for s, e in zip(sizes.tolist(), ends)]


def split_rows(array: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """The rows of `array` cut into consecutive runs of the given sizes (views, not copies).

    Examples:
        >>> split_rows(np.arange(5), np.array([2, 2, 1]))
        [array([0, 1]), array([2, 3]), array([4])]
    """
    size = int(sizes[0])
    if len(sizes) * size == len(array):  # equal runs: one reshape, then its rows
        return list(array.reshape(len(sizes), size, *array.shape[1:]))
    return np.split(array, np.cumsum(sizes)[:-1].tolist())


def split_stacked(stacked: Any, sizes: np.ndarray) -> list[Any]:
    """A tree of stacked arrays cut into consecutive runs of rows of the given sizes (views).

    Examples:
        >>> stacked = {"x": np.arange(5), "y": [np.arange(5) * 10]}
        >>> first, second = split_stacked(stacked, np.array([3, 2]))
        >>> first
        {'x': array([0, 1, 2]), 'y': [array([ 0, 10, 20])]}
        >>> second
        {'x': array([3, 4]), 'y': [array([30, 40])]}
    """
    if isinstance(stacked, np.ndarray):
        return split_rows(stacked, sizes)
    ends = np.cumsum(sizes).tolist()
    starts = [end - size for end, size in zip(ends, sizes.tolist())]
    return [map_leaves(operator.itemgetter(slice(s, e)), stacked) for s, e in zip(starts, ends)]


SHORT_RUN_BYTES = 64
"""Rows whose innermost contiguous run is at most this long are copied a run at a time."""

MIN_ROW_BYTES = 1024
"""Rows smaller than this are stacked by numpy alone: a Python step per row would cost more."""


def stack_arrays(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """`np.stack(arrays)`, faster for strided rows that end in a short contiguous run.

    numpy copies a strided array one innermost run at a time, at a cost per run:
    a horizontally flipped 64x64x3 uint8 image is 4,096 runs of 3 bytes, and
    stacking 64 of them took 35 microseconds an image on this machine. Seen as
    one item of the run's bytes (a 3-byte void) per pixel, the same copy took 9.

    Examples:
        >>> image = np.arange(3072, dtype=np.uint8).reshape(32, 32, 3)
        >>> np.array_equal(stack_arrays([image, image[:, ::-1]]), np.stack([image, image[:, ::-1]]))
        True
    """
    run = _run_copy_bytes(arrays)
    if run is None:
        return np.stack(arrays)
    shape, dtype = arrays[0].shape, arrays[0].dtype
    if any(array.shape != shape or array.dtype != dtype for array in arrays):
        return np.stack(arrays)  # numpy's promotion, or its error
    return _copy_runs(np.empty((len(arrays), *shape), dtype), arrays, run)


def stack_into(out: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """`np.stack(arrays, out=out)` of arrays of one shape and dtype, as `stack_arrays` copies.

    `out` is C-ordered, of their stacked shape (a region of a memory file, say).
    """
    run = _run_copy_bytes(arrays) if out.flags.c_contiguous else None
    if run is None:
        return np.stack(arrays, out=out)
    return _copy_runs(out, arrays, run)


def _copy_runs(out: np.ndarray, arrays: Sequence[np.ndarray], run: int) -> np.ndarray:
    """Row `i` of `out` set to `arrays[i]`, a strided one a `run`-byte item at a time."""
    void = np.dtype((np.void, run))
    items = out.view(void)[..., 0]
    for row, array in enumerate(arrays):
        if not array.flags.c_contiguous and array.strides[-1] == array.itemsize:
            items[row] = array.view(void)[..., 0]
        else:
            out[row] = array
    return out


def _run_copy_bytes(arrays: Sequence[np.ndarray]) -> int | None:
    """The bytes of a run where copying `arrays` a run at a time pays; else None.

    It pays for rows of `MIN_ROW_BYTES` or more whose last axis holds at most
    `SHORT_RUN_BYTES`, some of them strided. Every strided one must keep C's
    order of axes (flips allowed), so that the stack is C-ordered as numpy's is.
    """
    first = arrays[0] if len(arrays) else None
    if first is None or first.nbytes < MIN_ROW_BYTES or first.dtype.hasobject:
        return None
    run = first.itemsize * first.shape[-1]
    strided = [array for array in arrays if not array.flags.c_contiguous]
    if not 0 < run <= SHORT_RUN_BYTES or not strided:  # contiguous rows: numpy's loop is faster
        return None
    return run if all(map(_c_ordered_up_to_flips, strided)) else None


def _c_ordered_up_to_flips(array: np.ndarray) -> bool:
    sizes = [abs(stride) for stride in array.strides]
    return all(outer >= inner for outer, inner in itertools.pairwise(sizes))


def _stack_uniform(elements: Sequence[Any]) -> np.ndarray | None:
    """All `elements` stacked at once if that equals stacking any run of them; else None."""
    kinds = set(map(type, elements))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is np.ndarray:
        first = elements[0]
        if any(e.dtype != first.dtype or e.shape != first.shape for e in elements):
            return None
        return stack_arrays(elements)
    if not issubclass(kind, _SCALARS) or issubclass(kind, np.flexible):
        return None  # strings and bytes: a run's width would be its own longest
    array = np.array(elements)
    # Python ints past int64 make an object or uint64 array; a run of them alone may not.
    return None if kind is int and array.dtype != np.int64 else array


def map_leaves(fn: Callable[[Any], Any], tree: Any) -> Any:
    """Applies `fn` to every leaf of `tree`, keeping its structure.

    Examples:
        >>> map_leaves(lambda x: x * 2, {"a": [1, 2], "b": (3,)})
        {'a': [2, 4], 'b': (6,)}
    """
    if isinstance(tree, dict):
        return {key: map_leaves(fn, value) for key, value in tree.items()}
    if is_namedtuple(tree):
        return type(tree)(*(map_leaves(fn, value) for value in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_leaves(fn, value) for value in tree)
    return fn(tree)


def leaves(tree: Any, what: str = "A tree of arrays") -> list[Any]:
    """The leaves of `tree`, depth first, in its own order (None is an empty subtree).

    Args:
        tree: A dict, list, tuple or namedtuple nesting of leaves.
        what: What `tree` is, for the error if it nests too deep.

    Raises:
        ValueError: if `tree` nests deeper than the recursion limit or holds itself.

    Examples:
        >>> leaves({"a": [1, 2], "b": (3, None)})
        [1, 2, 3]
    """
    try:
        return _leaves(tree)
    except RecursionError:
        raise too_deep(what) from None


def _leaves(tree: Any) -> list[Any]:
    if tree is None:
        return []
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]


def too_deep(what: str) -> ValueError:
    """The error for a tree that nests deeper than Python's recursion limit, or holds itself.

    Examples:
        >>> str(too_deep("An element to batch")).startswith("An element to batch nests")
        True
    """
    return ValueError(
        f"{what} nests lists, tuples or dicts deeper than Python's recursion limit "
        f"(sys.getrecursionlimit() = {sys.getrecursionlimit()} levels), or contains itself (a "
        "list that holds itself, say). Elements must be trees nested well below that limit: "
        "flatten the deep part, or make it one leaf (a numpy array, for example)."
    )


def _stack_at(elements: Sequence[Any], path: str, strict: bool = False) -> Any:
    first = elements[0]
    if first is None:  # an empty subtree, as in JAX: nothing to stack
        for position, element in enumerate(elements):
            if element is not None:
                raise _structure_error(path, first, element, position)
        return None
    if isinstance(first, dict):
        keys = first.keys()
        for position, element in enumerate(elements):
            if not isinstance(element, dict) or element.keys() != keys:
                raise _structure_error(path, first, element, position)
        return {
            key: _stack_at([e[key] for e in elements], f"{path}[{key!r}]", strict) for key in keys
        }
    if isinstance(first, (list, tuple)):
        for position, element in enumerate(elements):
            if type(element) is not type(first) or len(element) != len(first):
                raise _structure_error(path, first, element, position)
        stacked = [
            _stack_at([e[i] for e in elements], f"{path}[{i}]", strict) for i in range(len(first))
        ]
        if is_namedtuple(first):
            return type(first)(*stacked)
        return type(first)(stacked)
    node = jax_children(first)
    if node is not None:
        return _stack_jax_node(elements, path, strict, node[1])
    if strict:
        for position, element in enumerate(elements):
            if isinstance(element, _NODES):
                raise _structure_error(path, first, element, position)
    return _stack_leaves(elements, path)


def jax_children(value: Any) -> tuple[list[Any], Any] | None:
    """The children and one-level structure of `value` where JAX registers it as a node.

    A `flax.struct.dataclass`, an `equinox.Module`, a class registered with
    `jax.tree_util`: Grain stacks them through JAX's tree functions, field by
    field, so a batch of them is one of them holding arrays. None for a leaf,
    and wherever the program has not imported jax: grainfn does not import it
    for this. (dicts, lists and tuples are grainfn's own nodes: not asked here.)
    """
    jax = sys.modules.get("jax")
    if jax is None or isinstance(value, _PLAIN_LEAVES):
        return None
    children, structure = jax.tree_util.tree_flatten(value, is_leaf=lambda x: x is not value)
    if jax.tree_util.treedef_is_leaf(structure):
        return None
    return children, structure


def jax_rebuild(structure: Any, children: Sequence[Any]) -> Any:
    """The node of `structure` (from `jax_children`) holding `children`."""
    import jax

    return jax.tree_util.tree_unflatten(structure, list(children))


def _stack_jax_node(elements: Sequence[Any], path: str, strict: bool, structure: Any) -> Any:
    """Elements of one JAX node `structure`, stacked child by child into one such node."""
    columns: list[list[Any]] = []
    for position, element in enumerate(elements):
        node = jax_children(element)
        if node is None or node[1] != structure:
            raise _structure_error(path, elements[0], element, position)
        columns = columns or [[] for _ in node[0]]
        for column, child in zip(columns, node[0]):
            column.append(child)
    name = type(elements[0]).__name__
    stacked = [_stack_at(column, f"{path}.{name}[{i}]", strict) for i, column in enumerate(columns)]
    return jax_rebuild(structure, stacked)


def _stack_leaves(leaves: Sequence[Any], path: str) -> np.ndarray:
    # Checking the few distinct types is far cheaper than one isinstance per leaf.
    kinds = set(map(type, leaves))
    if all(issubclass(kind, _SCALARS) for kind in kinds):
        return np.array(leaves)
    try:
        return stack_arrays(leaves) if kinds == {np.ndarray} else np.stack(leaves)
    except ValueError:
        shapes = [np.shape(leaf) for leaf in leaves]
        position = next(i for i, shape in enumerate(shapes) if shape != shapes[0])
        where = f"leaf {path}" if path else "elements"
        raise ValueError(
            f"Cannot batch {where}: element 0 has shape {shapes[0]} but element {position} has "
            f"shape {shapes[position]}. All elements of a batch need equal shapes; pad them "
            "first or pass a batch_fn."
        ) from None


def _structure_error(path: str, first: Any, other: Any, position: int) -> StructureError:
    where = f"at {path}" if path else "at the top level"
    return StructureError(
        f"Cannot batch elements of different structure {where}: element 0 is "
        f"{describe_node(first)} but element {position} is {describe_node(other)}."
    )


def describe_node(node: Any) -> str:
    """A pytree node for a message: None, a dict and its keys, a list or tuple and its length.

    Examples:
        >>> describe_node({"b": 1, "a": 2}), describe_node((1, 2)), describe_node(3.0)
        ("a dict with keys ['a', 'b']", 'a tuple of length 2', 'a leaf of type float')
    """
    if node is None:
        return "None"
    if isinstance(node, dict):
        return f"a dict with keys {sorted(map(str, node.keys()))}"
    if isinstance(node, (list, tuple)):
        return f"a {type(node).__name__} of length {len(node)}"
    return f"a leaf of type {type(node).__name__}"


def is_namedtuple(x: Any) -> bool:
    """Whether `x` is a namedtuple (a tuple whose class has `_fields`), rebuilt by its fields."""
    return isinstance(x, tuple) and hasattr(type(x), "_fields")
