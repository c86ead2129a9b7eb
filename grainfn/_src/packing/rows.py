"""The pure parts of concat_then_split: its argument checks, and what of an element fits a row.

An element is a flat dict; `features_of` reads its features in `length_struct`
order as arrays with a length axis. `fit` decides what of an element goes into
a row with some free slots, `is_full_length` whether it fills a row by itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from grainfn._src.core import state as records
from grainfn._src.core import validate

Features = tuple[np.ndarray, ...]
"""One element's features in `length_struct` order, each at least 1-d (a scalar has length 1)."""

Piece = tuple[Features, tuple[int, ...], tuple[int, ...]]
"""A part of an element in a row: its features, where each part starts, and its length."""


def check_length_struct(length_struct: Any) -> tuple[tuple[str, int], ...]:
    """`length_struct` as `(feature, row length)` pairs in its order, after checking it."""
    if not isinstance(length_struct, Mapping) or not length_struct:
        raise TypeError(
            "length_struct must be a non-empty dict from feature name to row length, "
            f"got {length_struct!r}."
        )
    out = []
    for name, length in length_struct.items():
        if not isinstance(name, str):
            raise TypeError(f"length_struct keys must be feature names (str), got {name!r}.")
        name_of = f"length_struct[{name!r}]"
        out.append((name, validate.check_positive_int(length, name_of, validate.INT32_MAX)))
    return tuple(out)


def check_names(
    names: Any, what: str, length_struct: tuple[tuple[str, int], ...]
) -> tuple[str, ...]:
    """`names` in `length_struct` order, after checking each is one of its features."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Collection):
        raise TypeError(f"{what} must be a collection of feature names, got {names!r}.")
    known = [name for name, _ in length_struct]
    unknown = sorted(map(repr, set(names) - set(known)))
    if unknown:
        raise ValueError(
            f"{what} names {', '.join(unknown)}, not a feature of length_struct; "
            f"the features are {known}."
        )
    return tuple(name for name in known if name in names)


def fit(
    lengths: tuple[int, ...],
    offsets: tuple[int, ...],
    free: list[int],
    meta: tuple[bool, ...],
) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """What of an element goes into a row with `free` slots per feature.

    A token feature takes what is left of it from `offsets` on, at most its
    free slots; a meta feature goes in whole or not at all.

    Returns:
        None if the element cannot go into the row (a meta feature does not
        fit, or it would be cut with no token in it); otherwise the tokens
        taken per feature, and the offsets of its rest (0 for meta features),
        None if all of it fits.

    Examples:
        >>> fit((5, 1), (0, 0), [3, 2], (False, True))
        ((3, 1), (3, 0))
        >>> fit((2, 1), (0, 0), [3, 2], (False, True))
        ((2, 1), None)
        >>> fit((5, 3), (0, 0), [3, 2], (False, True)) is None
        True
    """
    takes, rest, cut = [], [], False
    for length, offset, slots, is_meta in zip(lengths, offsets, free, meta):
        left = length - offset
        if left <= slots:
            takes.append(left)
            rest.append(0 if is_meta else length)
        elif is_meta:
            return None  # a meta feature does not fit
        else:
            cut = True
            takes.append(slots)
            rest.append(offset + slots)
    if not cut:
        return tuple(takes), None
    if not any(take for take, is_meta in zip(takes, meta) if not is_meta):
        return None  # no token of it fits
    return tuple(takes), tuple(rest)


def is_full_length(lengths: tuple[int, ...], targets: tuple[int, ...]) -> bool:
    """Whether an element fills a row by itself: no feature too long, one exactly long enough.

    Examples:
        >>> is_full_length((4, 1), (4, 2)), is_full_length((4, 3), (4, 2))
        (True, False)
    """
    return all(n <= t for n, t in zip(lengths, targets)) and any(
        n == t for n, t in zip(lengths, targets)
    )


def features_of(element: Any, names: tuple[str, ...]) -> Features:
    """The element's features in `names` order; ValueError unless it has exactly those.

    Examples:
        >>> features_of({"b": 7, "a": [1, 2]}, ("a", "b"))
        (array([1, 2]), array([7]))
    """
    if (type(element) is dict or isinstance(element, Mapping)) and len(element) == len(names):
        try:
            values = [element[name] for name in names]
        except KeyError:
            pass
        else:
            return tuple(
                v if type(v) is np.ndarray and v.ndim else np.atleast_1d(np.asarray(v))
                for v in values
            )
    keys = f"a dict with keys {sorted(map(str, element))}" if isinstance(element, Mapping) else ""
    raise ValueError(
        f"concat_then_split needs flat dicts with exactly the features of length_struct "
        f"{sorted(names)}, got {keys or records.describe_value(element)}."
    )
