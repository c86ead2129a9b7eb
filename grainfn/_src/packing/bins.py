"""Packing one block of elements into bins: first-fit and best-fit placement.

A block starts with `num_bins` empty bins. Each element, in order, goes into
a bin where every one of its packed features still fits: the first such bin
(first-fit) or the fullest one, by the sum over features of the cells in use
(best-fit). The block is complete when an element fits no bin; that element
starts the next block. Bins fill in order, so the bins in use are always
`0 .. open - 1`, and an empty bin takes any element that is not too long.

Placement is a Python loop over small integers; the packed arrays are then
built for the whole block at once (`grainfn._src.packing.arrays`): one row
per bin in use, a feature `f` of packed length `T` as a `(rows, T, ...)` array
of the bin's elements one after another and padding, with `f_segment_ids`
(1, 2, ... for the bin's elements, 0 on padding) and `f_positions` (0, 1, ...
within each element, 0 on padding), both int32. A meta feature not in
`length_struct` becomes the list of the row's elements' values.

A nested feature (a tree in `length_struct`) is packed leaf by leaf: each
leaf is a feature of its own in the fit check and the arrays, and the
packed block holds trees of `(rows, T, ...)` arrays. A block of flat
features reads each element with one `operator.itemgetter`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.packing.arrays import Memory, fill, tile_rows
from grainfn._src.packing.spec import POSITIONS, SEGMENT_IDS, PackSpec
from grainfn._src.packing.trees import collect, rebuild, where


def first_fit(
    used: Sequence[list[int]], capacities: Sequence[int], sizes: Sequence[int], count: int
) -> int:
    """The first of bins `0 .. count - 1` where every feature fits, or -1.

    Args:
        used: Per feature, per bin, the first free cell.
        capacities: Per feature, the cells of a bin.
        sizes: Per feature, the element's length.
        count: How many bins to look at.

    Examples:
        >>> first_fit([[8, 3, 1]], [8], [4], 3)
        1
        >>> first_fit([[8, 3, 1], [0, 9, 0]], [8, 9], [4, 1], 3)
        2
        >>> first_fit([[8, 8]], [8], [4], 2)
        -1
    """
    limits = [(cells, capacity - size) for cells, capacity, size in zip(used, capacities, sizes)]
    for b in range(count):
        if all(cells[b] <= limit for cells, limit in limits):
            return b
    return -1


def best_fit(
    used: Sequence[list[int]],
    capacities: Sequence[int],
    sizes: Sequence[int],
    scores: Sequence[int],
    count: int,
) -> int:
    """Of bins `0 .. count - 1` where every feature fits, the one with the highest score, or -1.

    A bin's score is the sum of its first free cells over features; ties go to
    the lowest bin.

    Examples:
        >>> best_fit([[2, 6, 6, 1]], [8], [2], [2, 6, 6, 1], 4)
        1
        >>> best_fit([[2, 6], [5, 0]], [8, 8], [2, 4], [7, 6], 2)
        1
    """
    limits = [(cells, capacity - size) for cells, capacity, size in zip(used, capacities, sizes)]
    best, top = -1, -1
    for b in range(count):
        if scores[b] > top and all(cells[b] <= limit for cells, limit in limits):
            best, top = b, scores[b]
    return best


def as_sequence(value: Any) -> np.ndarray:
    """A feature's value as an array with a leading length axis; a scalar has length 1.

    A Python int (or bool) gives int64, as in Grain; anything else is read with
    `np.asarray`.

    Examples:
        >>> as_sequence(5)
        array([5])
        >>> as_sequence([1.5, 2.5])
        array([1.5, 2.5])
    """
    if isinstance(value, int):
        return np.array([value], dtype=np.int64)
    array = np.asarray(value)
    return array.reshape(1) if array.ndim == 0 else array


class Block:
    """The elements of one block as they are placed: a mutable builder, one per block.

    Examples:
        >>> from grainfn._src.packing.spec import pack_spec
        >>> block = Block(pack_spec("first_fit", {"x": 4}, 2, shuffle_bins=False))
        >>> [block.add({"x": np.arange(n)}) for n in (3, 1, 2, 4)]
        [True, True, True, False]
        >>> block.pack()["x_segment_ids"]
        array([[1, 1, 1, 2],
               [1, 1, 0, 0]], dtype=int32)
    """

    def __init__(self, spec: PackSpec) -> None:
        bins = spec.num_bins
        self.spec = spec
        self.open = 0
        """The number of bins in use: bins `0 .. open - 1`."""
        self.bins = bins
        self.listed = spec.listed
        self.capacities = spec.lengths  # per leaf: a flat feature is one leaf
        self.alignments = spec.alignments
        self.limit = spec.max_sequences_per_bin
        self.best = spec.strategy == "best_fit"
        self.used = [[0] * bins for _ in spec.lengths]
        self.scores = [0] * bins
        self.counts = [0] * bins
        self.rows: list[int] = []  # each element's bin
        self.elements: list[tuple[np.ndarray, ...]] = []  # each element's packed leaves
        self.sizes: list[int] = []  # each element's length per leaf, flat
        self.extras: list[list[Any]] = []  # each element's listed meta features
        self.getter: Callable[[Any], Any]
        if spec.trees:
            self.getter = functools.partial(_leaves_of, _readers(spec))
            self.bare = False
        else:
            self.getter = operator.itemgetter(*spec.features)
            self.bare = len(spec.features) == 1  # the getter returns the value, not a tuple
        self.single = len(spec.lengths) == 1  # one leaf

    def add(self, element: Mapping[str, Any]) -> bool:
        """Places `element` in a bin; False (and nothing placed) if it fits no bin."""
        return self.place((element,)) == 1

    def place(self, elements: Sequence[Mapping[str, Any]]) -> int:
        """Places elements in order until one fits no bin; returns how many were placed.

        Raises:
            ValueError: if a feature is missing or longer than its packed length.
        """
        if len(self.capacities) <= 2 and self.alignments is None and self.limit is None:
            return self._place_simple(elements)
        return self._place_any(elements)

    def features_of(self, element: Mapping[str, Any]) -> tuple[Any, ...]:
        """The element's packed leaves in order, after keeping its listed meta features.

        Raises:
            ValueError: naming the missing feature, or where a nested feature
                differs from its tree in `length_struct`.
        """
        try:
            values = self.getter(element)
            if self.listed:
                self.extras.append([element[name] for name in self.listed])
        except (KeyError, TypeError, IndexError) as error:
            raise _missing_feature(self.spec, element) from error
        return (values,) if self.bare else values

    def _place_simple(self, elements: Sequence[Mapping[str, Any]]) -> int:
        """`place` for one or two leaves, without alignment or a limit per bin, inlined.

        The common case, written out with local variables: one leaf is
        handled as two whose second is always empty.
        """
        spec, features_of, single, listed = self.spec, self.features_of, self.single, self.listed
        rows, placed, lengths, extras = self.rows, self.elements, self.sizes, self.extras
        best, scores = self.best, self.scores
        cells = self.used[0]
        cells2 = [0] * self.bins if single else self.used[1]
        capacity, capacity2 = self.capacities[0], 0 if single else self.capacities[1]
        opened, bins = self.open, self.bins
        for done, element in enumerate(elements):
            values = features_of(element)
            try:
                size = values[0].shape[0]
                size2 = 0 if single else values[1].shape[0]
            except (AttributeError, IndexError):  # not an array, or a scalar: the slow path
                values = tuple(as_sequence(value) for value in values)
                size, size2 = values[0].shape[0], 0 if single else values[1].shape[0]
            limit, limit2 = capacity - size, capacity2 - size2
            b = -1
            if best:
                top = -1
                for i in range(opened):
                    if scores[i] > top and cells[i] <= limit and cells2[i] <= limit2:
                        b, top = i, scores[i]
            else:
                for i in range(opened):
                    if cells[i] <= limit and cells2[i] <= limit2:
                        b = i
                        break
            if b < 0:
                _check_sizes(spec, (size, size2))
                if opened == bins:
                    if listed:
                        extras.pop()
                    self.open = opened
                    return done
                b = opened
                opened += 1
            rows.append(b)
            placed.append(values)
            lengths.append(size)
            cells[b] += size
            if not single:
                lengths.append(size2)
                cells2[b] += size2
            scores[b] = cells[b] + cells2[b]
        self.open = opened
        return len(elements)

    def _place_any(self, elements: Sequence[Mapping[str, Any]]) -> int:
        """`place` for any features and options."""
        spec, features_of, listed = self.spec, self.features_of, self.listed
        used, capacities, scores, counts = self.used, self.capacities, self.scores, self.counts
        alignments, limit, best = self.alignments, self.limit, self.best
        rows, placed, lengths, extras = self.rows, self.elements, self.sizes, self.extras
        for done, element in enumerate(elements):
            values = features_of(element)
            try:
                sizes = [value.shape[0] for value in values]
            except (AttributeError, IndexError):  # not an array, or a scalar: the slow path
                values = tuple(as_sequence(value) for value in values)
                sizes = [value.shape[0] for value in values]
            if best:
                b = best_fit(used, capacities, sizes, scores, self.open)
            else:
                b = first_fit(used, capacities, sizes, self.open)
            if b < 0:
                _check_sizes(spec, sizes)
                if self.open == self.bins:
                    if listed:
                        extras.pop()
                    return done
                b = self.open
                self.open += 1
            rows.append(b)
            placed.append(values)
            lengths.extend(sizes)
            if alignments is None:
                for cells, size in zip(used, sizes):
                    cells[b] += size
            else:
                for cells, size, alignment in zip(used, sizes, alignments):
                    cells[b] += -(-size // alignment) * alignment  # starts stay aligned
            if best:
                scores[b] = sum(cells[b] for cells in used)
            if limit is not None:
                counts[b] += 1
                if counts[b] >= limit:
                    used[0][b] = capacities[0] + 1  # nothing fits a full bin any more
        return len(elements)

    def pack(self, memory: Sequence[Memory] | None = None) -> dict[str, Any]:
        """The packed block: one row per bin in use, keys sorted (see the module doc).

        Args:
            memory: Per leaf, where its arrays' buffer comes from; None: new allocations.
        """
        spec, count, leaves = self.spec, len(self.rows), len(self.spec.lengths)
        order = np.argsort(np.array(self.rows), kind="stable")  # by bin, in placement order
        rows = np.array(self.rows)[order]
        sizes = np.array(self.sizes).reshape(count, leaves)[order]
        pieces = tile_rows(rows, sizes, spec.lengths, spec.alignments or (1,) * leaves)
        columns = list(zip(*[self.elements[k] for k in order.tolist()]))  # per leaf
        names = spec.features if spec.trees is None else [_name(path) for path in spec.paths]
        arrays = [
            fill(
                columns[i],
                pieces,
                i,
                self.open,
                spec.lengths[i],
                None if spec.paddings is None else spec.paddings[i],
                names[i],
                None if memory is None else memory[i],
            )
            for i in range(leaves)
        ]
        # Three iterators over the leaves, moved on together: one leaf for a
        # flat feature, the leaves of its tree for a nested one.
        trees, values, segment_ids, positions = spec.trees or {}, *map(iter, zip(*arrays))
        out: dict[str, Any] = {}
        for name in spec.features:
            tree = trees.get(name)
            if tree is None:
                out[name], ids, at = next(values), next(segment_ids), next(positions)
            else:
                out[name] = rebuild(tree, values)
                ids, at = rebuild(tree, segment_ids), rebuild(tree, positions)
            if name not in spec.meta_features:
                out[name + SEGMENT_IDS] = ids
                out[name + POSITIONS] = at
        for i, name in enumerate(spec.listed):
            lists: list[list[Any]] = [[] for _ in range(self.open)]
            for b, extras in zip(self.rows, self.extras):
                lists[b].append(extras[i])
            out[name] = lists
        return {key: out[key] for key in spec.output_keys}


def _readers(spec: PackSpec) -> tuple[tuple[str, Any], ...]:
    """Per packed feature, its name and its tree (None for a flat feature)."""
    trees = spec.trees or {}
    return tuple((name, trees.get(name)) for name in spec.features)


def _leaves_of(readers: tuple[tuple[str, Any], ...], element: Mapping[str, Any]) -> tuple[Any, ...]:
    """The element's packed leaves in order; a nested feature's dicts may hold other keys.

    Raises:
        KeyError, TypeError: for a missing feature or an element that is not a dict.
        ValueError: naming where a nested feature differs from its tree.
    """
    found: list[Any] = []
    for name, tree in readers:
        value = element[name]
        if tree is None:
            found.append(value)
        else:
            collect(tree, value, (name,), found, exact=False)
    return tuple(found)


def _name(path: tuple[Any, ...]) -> str:
    """A leaf's name in messages: the feature, then the path in its tree (`a['x']`)."""
    return f"{path[0]}{where(path[1:])}"


def _check_sizes(spec: PackSpec, sizes: Sequence[int]) -> None:
    for path, size, capacity in zip(spec.paths, sizes, spec.lengths):
        if size <= capacity:
            continue
        if len(path) == 1:
            (name,) = path
            raise ValueError(
                f"An element's feature {name!r} has length {size}, more than its packed "
                f"length {capacity} (length_struct[{name!r}]). Truncate elements before "
                f"packing, e.g. with .map(lambda x: {{**x, {name!r}: x[{name!r}][:{capacity}]}})."
            )
        raise ValueError(
            f"An element's feature {_name(path)} has length {size}, more than its packed length "
            f"{capacity} (length_struct{where(path)}). Truncate elements before packing, to "
            f"element{where(path)}[:{capacity}] with a map."
        )


def _missing_feature(spec: PackSpec, element: Any) -> Exception:
    if not isinstance(element, Mapping):
        return TypeError(
            f"Packing takes dict elements with the features of length_struct, got "
            f"{validate.short_repr(element)} of type {type(element).__name__}."
        )
    needed = [*spec.features, *spec.listed]
    missing = [name for name in needed if name not in element] or needed
    return ValueError(
        f"An element has no feature {missing[0]!r}: packing needs every feature of "
        f"length_struct and meta_features, {needed}; the element has {sorted(map(str, element))}."
    )
