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
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from grainfn._src.packing.arrays import Memory, fill, layout
from grainfn._src.packing.spec import POSITIONS, SEGMENT_IDS, PackSpec


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
        self.features = spec.features
        self.listed = spec.listed
        self.capacities = spec.lengths
        self.alignments = spec.alignments
        self.limit = spec.max_sequences_per_bin
        self.best = spec.strategy == "best_fit"
        self.used = [[0] * bins for _ in spec.features]
        self.scores = [0] * bins
        self.counts = [0] * bins
        self.rows: list[int] = []  # each element's bin
        self.elements: list[tuple[np.ndarray, ...]] = []  # each element's packed features
        self.sizes: list[int] = []  # each element's length per packed feature, flat
        self.extras: list[list[Any]] = []  # each element's listed meta features
        self.getter = operator.itemgetter(*spec.features)
        self.single = len(spec.features) == 1  # the getter returns the value, not a tuple

    def add(self, element: Mapping[str, Any]) -> bool:
        """Places `element` in a bin; False (and nothing placed) if it fits no bin."""
        return self.place((element,)) == 1

    def place(self, elements: Sequence[Mapping[str, Any]]) -> int:
        """Places elements in order until one fits no bin; returns how many were placed.

        Raises:
            ValueError: if a feature is missing or longer than its packed length.
        """
        if len(self.features) <= 2 and self.alignments is None and self.limit is None:
            return self._place_simple(elements)
        return self._place_any(elements)

    def features_of(self, element: Mapping[str, Any]) -> tuple[Any, ...]:
        """The element's packed features in order, after keeping its listed meta features.

        Raises:
            ValueError: naming the missing feature.
        """
        try:
            values = self.getter(element)
            if self.listed:
                self.extras.append([element[name] for name in self.listed])
        except (KeyError, TypeError, IndexError) as error:
            raise _missing_feature(self.spec, element) from error
        return (values,) if self.single else values

    def _place_simple(self, elements: Sequence[Mapping[str, Any]]) -> int:
        """`place` for one or two features, without alignment or a limit per bin, inlined.

        The common case, written out with local variables: one feature is
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
            memory: Per packed feature, where its arrays' buffer comes from; None:
                new allocations.
        """
        spec, count, features = self.spec, len(self.rows), len(self.spec.features)
        order = np.argsort(np.array(self.rows), kind="stable")  # by bin, in placement order
        rows = np.array(self.rows)[order]
        sizes = np.array(self.sizes).reshape(count, features)[order]
        pieces = layout(rows, sizes, spec.lengths, spec.alignments or (1,) * features)
        columns = list(zip(*[self.elements[k] for k in order.tolist()]))  # per feature
        out: dict[str, Any] = {}
        for i, name in enumerate(spec.features):
            padding = None if spec.paddings is None else spec.paddings[i]
            values, segment_ids, positions = fill(
                columns[i],
                pieces,
                i,
                self.open,
                spec.lengths[i],
                padding,
                name,
                None if memory is None else memory[i],
            )
            out[name] = values
            if name not in spec.meta_features:
                out[name + SEGMENT_IDS] = segment_ids
                out[name + POSITIONS] = positions
        for i, name in enumerate(spec.listed):
            lists: list[list[Any]] = [[] for _ in range(self.open)]
            for b, extras in zip(self.rows, self.extras):
                lists[b].append(extras[i])
            out[name] = lists
        return {key: out[key] for key in spec.output_keys}


def _check_sizes(spec: PackSpec, sizes: Sequence[int]) -> None:
    for name, size, capacity in zip(spec.features, sizes, spec.lengths):
        if size > capacity:
            raise ValueError(
                f"An element's feature {name!r} has length {size}, more than its packed "
                f"length {capacity} (length_struct[{name!r}]). Truncate elements before "
                f"packing, e.g. with .map(lambda x: {{**x, {name!r}: x[{name!r}][:{capacity}]}})."
            )


def _missing_feature(spec: PackSpec, element: Any) -> Exception:
    if not isinstance(element, Mapping):
        return TypeError(
            f"Packing takes dict elements with the features of length_struct, got {element!r} "
            f"of type {type(element).__name__}."
        )
    needed = [*spec.features, *spec.listed]
    missing = [name for name in needed if name not in element] or needed
    return ValueError(
        f"An element has no feature {missing[0]!r}: packing needs every feature of "
        f"length_struct and meta_features, {needed}; the element has {sorted(map(str, element))}."
    )
