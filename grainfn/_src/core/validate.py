"""Argument checks shared by the combinators.

Every check raises with a message that names the bad value and what is allowed,
so that a user can fix the call without reading the source.
"""

from __future__ import annotations

import math
import operator
import os
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.index.seeds import SEED_LIMIT

INT64_MAX = 2**63 - 1
"""The largest position, length or size: positions are 64-bit integers."""
INT32_MAX = 2**31 - 1
"""The largest packed length: packed segment ids and positions are 32-bit integers."""
_LIMIT_NAMES = {INT64_MAX: "2**63 - 1", INT32_MAX: "2**31 - 1"}


class PositionOutOfRangeError(ValueError, IndexError):
    """A state whose position lies outside the data it reads.

    A ValueError, as every state grainfn refuses, and an IndexError, as Grain
    raises for a `next_index` out of range, so code written for either catches it.

    Examples:
        >>> error = PositionOutOfRangeError("position 30 is past the end (20)")
        >>> isinstance(error, ValueError) and isinstance(error, IndexError)
        True
    """


def check_seed(seed: Any, what: str = "seed", limit: int | None = SEED_LIMIT) -> int:
    """Returns `seed` as an int after checking it lies in [0, limit) ([0, 2**32) by default).

    Args:
        seed: The seed to check.
        what: How the message names it.
        limit: One more than the largest seed allowed; None: any integer >= 0.

    Examples:
        >>> check_seed(7)
        7
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be an integer in [0, 2**32), got -1.
    """
    bound = "2**32" if limit == SEED_LIMIT else str(limit)
    allowed = "an integer >= 0" if limit is None else f"an integer in [0, {bound})"
    number = integer_or_none(seed)
    if number is None:
        raise TypeError(f"{what} must be {allowed}, got {seed!r}.")
    if number < 0 or (limit is not None and number >= limit):
        raise ValueError(f"{what} must be {allowed}, got {number}.")
    return number


def check_integer(value: Any, what: str) -> int:
    """Returns `value` as an int after checking that it is one (bools are not).

    Examples:
        >>> check_integer(3.0, "stop")
        Traceback (most recent call last):
        ...
        TypeError: stop must be an integer, got 3.0 of type float.
    """
    number = integer_or_none(value)
    if number is None:
        raise TypeError(f"{what} must be an integer, got {value!r} of type {type(value).__name__}.")
    return number


def check_nonnegative_int(value: Any, what: str) -> int:
    """Returns `value` as an int after checking that it is >= 0.

    Examples:
        >>> check_nonnegative_int(-2, "threads")
        Traceback (most recent call last):
        ...
        ValueError: threads must be an integer >= 0, got -2.
    """
    number = integer_or_none(value)
    if number is None:
        raise TypeError(f"{what} must be an integer >= 0, got {value!r}.")
    if number < 0:
        raise ValueError(f"{what} must be an integer >= 0, got {number}.")
    return number


def check_positive_int(value: Any, what: str, maximum: int | None = None) -> int:
    """Returns `value` as an int after checking that it is >= 1 (and <= `maximum`).

    Examples:
        >>> check_positive_int(2**63, "batch_size", maximum=INT64_MAX)
        Traceback (most recent call last):
        ...
        ValueError: batch_size must be a positive integer up to 2**63 - 1, got 9223372036854775808.
    """
    number = integer_or_none(value)
    if number is None:
        raise TypeError(f"{what} must be a positive integer, got {value!r}.")
    if number <= 0:
        raise ValueError(f"{what} must be a positive integer, got {number}.")
    if maximum is not None and number > maximum:
        limit = _LIMIT_NAMES.get(maximum, str(maximum))
        raise ValueError(f"{what} must be a positive integer up to {limit}, got {number}.")
    return number


def check_length(obj: Any, what: str) -> int:
    """`len(obj)`, after checking that `obj.__len__()` returned an integer in [0, 2**63 - 1].

    Python's own `len()` refuses a length past 2**63 - 1 with an OverflowError
    that names neither the object nor the limit; this names both. An error
    that `__len__` itself raises keeps its type and gains a note.

    Args:
        obj: An object with `__len__`: a data source, a selection map.
        what: How the messages name it ("the data source Records").

    Examples:
        >>> check_length([1, 2, 3], "the data source list")
        3
        >>> class Huge:
        ...     def __len__(self):
        ...         return 2**64
        >>> check_length(Huge(), "the data source Huge")
        Traceback (most recent call last):
        ...
        ValueError: len() of the data source Huge must be an integer in [0, 2**63 - 1], got
        18446744073709551616.
    """
    try:
        length = obj.__len__()
    except Exception as error:
        error.add_note(f"Raised by len() of {what}.")
        raise
    allowed = "an integer in [0, 2**63 - 1]"
    if not is_integer(length):
        raise TypeError(
            f"len() of {what} must be {allowed}, got {short_repr(length)} of type "
            f"{type(length).__name__}."
        )
    length = operator.index(length)
    if not 0 <= length <= INT64_MAX:
        raise ValueError(f"len() of {what} must be {allowed}, got {length}.")
    return length


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 60


def short_repr(value: Any, limit: int = 80) -> str:
    """`repr(value)` for a message: at most `limit` characters, however deep or large `value` is.

    Nested lists, tuples and dicts show a few levels (a list that contains
    itself, or one nested thousands deep, would exhaust the recursion limit of
    `repr`), and a repr that fails is replaced by the type's name.

    Examples:
        >>> short_repr([1, [2, [3, [4, [5]]]]])
        '[1, [2, [3, [...]]]]'
        >>> loop = []
        >>> loop.append(loop)
        >>> short_repr(loop)
        '[[[[...]]]]'
    """
    try:
        text = _SHORT.repr(value)
    except Exception:  # a broken or too deep __repr__ of the user's
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_flag(value: Any, what: str) -> bool:
    """`value` as a bool, if it is one (numpy's included); TypeError for anything else.

    A flag is never read with `bool()`: the string 'False' is true, and would
    quietly mean the opposite of what was written.

    Examples:
        >>> check_flag(False, "adaptive")
        False
        >>> check_flag("False", "adaptive")
        Traceback (most recent call last):
        ...
        TypeError: adaptive must be True or False, got 'False' (a str).
    """
    kind = type(value)
    if kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")):
        return bool(value)
    raise TypeError(
        f"{what} must be True or False, got {short_repr(value)} (a {type(value).__name__})."
    )


def check_callable(fn: Any, what: str) -> Callable[..., Any]:
    """Returns `fn` after checking that it can be called."""
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {fn!r} of type {type(fn).__name__}.")
    return fn


def check_list(
    value: Any, what: str, items: str = "datasets", allow_empty: bool = False
) -> tuple[Any, ...]:
    """`value` as a tuple, after checking it is a list (any sequence but a string) of `items`.

    Only the list itself is checked; each caller checks its items.

    Args:
        value: What the caller was given.
        what: The caller, for the message (`"mix"`, `"MapDataset.concatenate"`).
        items: What the list holds, for the message.
        allow_empty: Whether an empty list is allowed.

    Raises:
        TypeError: if `value` is not a list (a dict, a string, a single dataset).
        ValueError: if the list is empty and `allow_empty` is False.

    Examples:
        >>> check_list([1, 2], "mix")
        (1, 2)
        >>> check_list([], "mix", "datasets or streams")
        Traceback (most recent call last):
        ...
        ValueError: mix takes a non-empty list of datasets or streams, got [].
        >>> check_list({"a": 1}, "zip")
        Traceback (most recent call last):
        ...
        TypeError: zip takes a list of datasets, got {'a': 1} (a dict).
    """
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise TypeError(
            f"{what} takes a list of {items}, got {short_repr(value)} (a {type(value).__name__})."
        )
    if not value and not allow_empty:
        raise ValueError(f"{what} takes a non-empty list of {items}, got {short_repr(value)}.")
    return tuple(value)


def check_weights(weights: Sequence[Any], count: int) -> tuple[float, ...]:
    """Returns mixing weights as floats: one per component, finite, > 0.

    Examples:
        >>> check_weights([1, 2.5], 2)
        (1.0, 2.5)
        >>> check_weights([1, -2], 2)
        Traceback (most recent call last):
        ...
        ValueError: weights must be finite and > 0, got -2 at position 1 of [1, -2].
    """
    weights = list(weights)
    if len(weights) != count:
        raise ValueError(
            f"weights must have one entry per dataset: got {len(weights)} weights "
            f"for {count} datasets."
        )
    result = []
    for position, weight in enumerate(weights):
        if isinstance(weight, (bool, str, bytes)) or (
            not isinstance(weight, (int, float)) and not _is_real(weight)
        ):
            raise TypeError(f"weights must be numbers, got {weight!r} at position {position}.")
        as_float = float(weight)
        if not math.isfinite(as_float) or as_float <= 0:
            raise ValueError(
                f"weights must be finite and > 0, got {weight!r} at position {position} of "
                f"{weights!r}."
            )
        result.append(as_float)
    smallest, largest = min(result), max(result)
    if not math.isfinite(largest * (100 / smallest)):
        raise ValueError(
            f"weights are too far apart: the smallest, {weights[result.index(smallest)]!r} at "
            f"position {result.index(smallest)}, is scaled to 100 (Grain's rule), and the "
            f"largest, {weights[result.index(largest)]!r}, would then be infinite. Keep the "
            "weights within a factor of 1e300 of each other, or drop the smallest component."
        )
    return tuple(result)


def integer_or_none(value: Any) -> int | None:
    """`value` as an int when it is an integer of any library, else None.

    An integer is anything with `__index__`: a Python int, a numpy integer,
    a 0-d integer array. A bool is not, here: `True` for a count or a
    position is a mistake to name, not the number 1.

    Examples:
        >>> import numpy as np
        >>> integer_or_none(np.int64(3)), integer_or_none(True), integer_or_none(3.0)
        (3, None, None)
    """
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def is_integer(value: Any) -> bool:
    """Whether `value` is an integer (anything with `__index__`: int, numpy ints, bool)."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def is_hashable(value: Any) -> bool:
    """Whether `hash(value)` works (a tuple holding a list is `Hashable` yet fails it)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _is_real(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def check_path(path: Any, kind: str, names: str = "a file name") -> str:
    """`path` as a string: a `str` or `os.PathLike` naming one `kind` file.

    Args:
        path: The value given.
        kind: The format, for the message ("Parquet", "TFRecord").
        names: What a path may name, for the message.

    Examples:
        >>> import pathlib
        >>> check_path(pathlib.Path("data") / "train.parquet", "Parquet")
        'data/train.parquet'
        >>> check_path(b"x.tfrecord", "TFRecord")
        Traceback (most recent call last):
        ...
        TypeError: A TFRecord path must be a str or os.PathLike, got b'x.tfrecord' of type bytes.
    """
    name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(name, str):
        raise TypeError(
            f"A {kind} path must be a str or os.PathLike, got {path!r} of type "
            f"{type(path).__name__}."
        )
    if not name:
        raise ValueError(f"A {kind} path is the empty string; pass {names}.")
    return name


class UserStopIterationError(RuntimeError):
    """A user function raised StopIteration while a pipeline read an element.

    A StopIteration that escaped a user function (a map, a filter, a batch_fn,
    a data source, ...) would tell the reading machinery that the data ended,
    and the rest of the data would be silently lost. So grainfn raises this
    error in its place, as Python does for a generator (PEP 479): its message
    names the stage and the position, and the StopIteration is its
    `__cause__`. As with any other error of a user function, the iterator
    stays after the last element it returned, and the next read raises again.

    Examples:
        >>> error = UserStopIterationError("map(parse) raised StopIteration")
        >>> isinstance(error, RuntimeError)
        True
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # The cause travels too (from a worker process to the parent), which pickling drops.
        return _rebuilt_user_stop, (self.args, self.__cause__), self.__dict__


def _rebuilt_user_stop(
    args: tuple[Any, ...], cause: BaseException | None
) -> UserStopIterationError:
    error = UserStopIterationError(*args)
    error.__cause__ = cause
    return error


def note_user_error(error: BaseException, stage: str, where: str) -> None:
    """Adds a note to `error` naming the stage whose user function raised it, and where.

    The error keeps its type and traceback: re-raise it with a bare `raise`.
    A StopIteration is the one exception not noted but replaced: it would end
    the data silently, so this raises `UserStopIterationError` from it instead. Call
    it where a user function is called, before the error reaches a cursor (for
    which a StopIteration means the end).

    Examples:
        >>> error = KeyError("id")
        >>> note_user_error(error, "map(parse)", "position 7")
        >>> error.__notes__
        ['Raised by the function of map(parse), reading position 7.']
        >>> note_user_error(StopIteration(), "map(parse)", "position 7")
        Traceback (most recent call last):
        ...
        grainfn._src.core.validate.UserStopIterationError: The function of map(parse) raised
        StopIteration, reading position 7. ...
    """
    if isinstance(error, StopIteration):
        raise UserStopIterationError(
            f"The function of {stage} raised StopIteration, reading {where}. Inside a "
            "pipeline a StopIteration would end the data silently, so it is this error "
            "instead (the StopIteration is its __cause__). Return a value or raise another "
            "exception; to drop elements, filter them."
        ) from error
    error.add_note(f"Raised by the function of {stage}, reading {where}.")


def note_source_error(error: BaseException, source: str, key: int, index: int) -> None:
    """Adds a note to `error`, which a data source's `[]` raised, naming the source and the read.

    The error keeps its type and traceback: re-raise it with a bare `raise`. A
    StopIteration becomes a `UserStopIterationError`, as in `note_user_error`.

    Args:
        error: What `source[key]` raised.
        source: The source's stage, as pipeline descriptions name it.
        key: The index the source was asked for.
        index: The position of the dataset that read it (past the length: a later epoch).

    Examples:
        >>> error = IndexError("list index out of range")
        >>> note_source_error(error, "source(Records, length 10)", 3, 13)
        >>> error.__notes__
        ['Raised by the data source source(Records, length 10), reading source[3] (position 13).']
    """
    if isinstance(error, StopIteration):
        raise UserStopIterationError(
            f"The data source {source} raised StopIteration at source[{key}], reading position "
            f"{index}. Grain ends the data there, silently; grainfn raises this error instead "
            "(the StopIteration is its __cause__), so that no record is lost unseen. A source "
            "that has run out of records says so with its length: make len() count only the "
            "records it has, or raise IndexError past them. See 'What differs, and why' in "
            "docs/migrating-from-grain.md."
        ) from error
    error.add_note(f"Raised by the data source {source}, reading source[{key}] (position {index}).")


def verdict_truth(verdict: Any) -> bool:
    """A predicate's result read as a bool: a bool (numpy's too), or an integer (`x % 2`).

    Anything else is refused rather than read with `bool()`: None (a
    forgotten `return`) would drop every element, the string 'False' keep
    every one. An array of one element counts as its element.

    Raises:
        TypeError: for anything else (`ambiguous_verdict` says what to do).

    Examples:
        >>> import numpy as np
        >>> verdict_truth(True), verdict_truth(0), verdict_truth(np.int64(3) % 2)
        (True, False, True)
        >>> verdict_truth(None)
        Traceback (most recent call last):
        ...
        TypeError: None is not a bool
    """
    if verdict is True or verdict is False:
        return verdict
    dtype = getattr(verdict, "dtype", None)
    if dtype is not None and getattr(verdict, "size", 0) == 1 and dtype.kind in "biu":
        return bool(verdict)  # numpy's and jax's bools and integers, and 1-element arrays
    if isinstance(verdict, int):
        return bool(verdict)
    raise TypeError(f"{short_repr(verdict)} is not a bool")


def ambiguous_verdict(verdict: Any, stage: str, where: str) -> TypeError:
    """The error for a predicate's result that is not a bool (see `verdict_truth`).

    Examples:
        >>> import numpy as np
        >>> raise ambiguous_verdict(np.array([True, False]), "filter(keep)", "position 3")
        Traceback (most recent call last):
        ...
        TypeError: The predicate of filter(keep) must return a bool; reading position 3 it
        returned an array of shape (2,), whose truth value is ambiguous. Reduce it to one
        bool, with .any() or .all() for example.
        >>> raise ambiguous_verdict(None, "filter(keep)", "position 3")
        Traceback (most recent call last):
        ...
        TypeError: The predicate of filter(keep) must return a bool; reading position 3 it
        returned None (a NoneType). Return True to keep the element and False to drop it (a
        forgotten `return` returns None).
    """
    shape = getattr(verdict, "shape", None)
    if shape is not None and shape != ():
        return TypeError(
            f"The predicate of {stage} must return a bool; reading {where} it returned an "
            f"array of shape {shape}, whose truth value is ambiguous. Reduce it to one bool, "
            "with .any() or .all() for example."
        )
    return TypeError(
        f"The predicate of {stage} must return a bool; reading {where} it returned "
        f"{short_repr(verdict)} (a {type(verdict).__name__}). Return True to keep the element "
        "and False to drop it (a forgotten `return` returns None)."
    )
