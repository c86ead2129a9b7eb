"""Iteration states: small frozen records, and their versioned JSON-able form.

A stream's state is a nest of the records below, one per stateful stage, with
the same shape for the stream's whole life. Records are NamedTuples, so they
are also JAX pytrees whose leaves are plain integers and booleans. The state
never holds data: only positions and counters.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple, TypeVar

STATE_VERSION = 1
"""The version of the dict form written by `to_dict`; `from_dict` reads only this one."""


class DatasetPosition(NamedTuple):
    """State of `from_dataset`: the position of the next element to read."""

    position: int


class CountState(NamedTuple):
    """State of a stage that counts the elements it has passed on (random_map, map_with_index)."""

    seen: int
    parent: Any


class LimitState(NamedTuple):
    """State of `limit`: how many elements it has passed on."""

    taken: int
    parent: Any


class SplitState(NamedTuple):
    """State of a stream `flat_map`: parts of the current element taken, and the state before it."""

    taken: int
    parent: Any


class RepeatState(NamedTuple):
    """State of `repeat`: the current epoch and the parent's state within it."""

    epoch: int
    parent: Any


class MixState(NamedTuple):
    """State of a stream `mix`: the next mixed position, whether it ended, and each component."""

    position: int
    stopped: bool
    components: tuple[Any, ...]


RECORDS: dict[str, type[Any]] = {
    record.__name__: record
    for record in (DatasetPosition, CountState, LimitState, SplitState, RepeatState, MixState)
}
"""The state records `from_dict` can rebuild, by name. Stages defined elsewhere add theirs
with `register`."""

R = TypeVar("R", bound=type)


def register(record: R) -> R:
    """Makes a stage's own state record (a NamedTuple) readable by `from_dict`.

    Use it as a class decorator next to the stage that owns the record.
    `check_record` reads fields by name: `parent` and `components` hold parent
    states (the stage checks them), `stopped` is a bool, and every other field
    is a counter (an integer >= 0), so a state stays positions and counters.

    Examples:
        >>> from typing import NamedTuple
        >>> @register
        ... class ExampleState(NamedTuple):
        ...     emitted: int
        ...     parent: Any
        >>> from_dict(to_dict(ExampleState(2, DatasetPosition(5))))
        ExampleState(emitted=2, parent=DatasetPosition(position=5))
    """
    if not (isinstance(record, type) and issubclass(record, tuple) and hasattr(record, "_fields")):
        raise TypeError(f"register takes a NamedTuple class, got {record!r}.")
    known = RECORDS.get(record.__name__)
    if known is not None and not _same_definition(known, record):
        raise ValueError(
            f"A state record named {record.__name__} is already registered ({known!r}); "
            "give the new record another name."
        )
    RECORDS[record.__name__] = record
    return record


def check_record(state: Any, expected: type[Any], stage: str, path: str) -> None:
    """Raises ValueError unless `state` is an `expected` record with valid counters."""
    if not isinstance(state, expected):
        raise ValueError(
            f"State does not fit this pipeline at {path or 'the top'}: the stage {stage} "
            f"expects a {expected.__name__}, got {describe_value(state)}."
        )
    for name, value in zip(state._fields, state):
        if name in ("parent", "components"):
            continue
        where = f"{path}.{name}" if path else name
        if name == "stopped":
            if not isinstance(value, bool):
                raise ValueError(
                    f"State field {where} must be a bool, got {describe_value(value)}."
                )
        elif isinstance(value, bool) or not _is_nonnegative_int(value):
            raise ValueError(
                f"State field {where} must be an integer >= 0, got {describe_value(value)}."
            )


def to_dict(state: Any) -> Any:
    """Turns a state record nest into JSON-able dicts, lists, ints and bools.

    Examples:
        >>> to_dict(CountState(seen=3, parent=DatasetPosition(7)))
        {'kind': 'CountState', 'seen': 3, 'parent': {'kind': 'DatasetPosition', 'position': 7}}
    """
    if isinstance(state, tuple) and hasattr(state, "_fields"):
        out: dict[str, Any] = {"kind": type(state).__name__}
        out.update({name: to_dict(value) for name, value in zip(state._fields, state)})
        return out
    if isinstance(state, tuple):
        return [to_dict(value) for value in state]
    if isinstance(state, bool):
        return state
    return operator.index(state)


def from_dict(data: Any, path: str = "") -> Any:
    """Rebuilds a state record nest from `to_dict`'s output, naming any bad field.

    Examples:
        >>> from_dict({"kind": "DatasetPosition", "position": 7})
        DatasetPosition(position=7)
        >>> from_dict({"kind": "DatasetPosition"})
        Traceback (most recent call last):
        ...
        ValueError: State is truncated: field position of DatasetPosition is missing at the top.
    """
    if isinstance(data, dict):
        kind = data.get("kind")
        record = RECORDS.get(kind) if isinstance(kind, str) else None
        if record is None:
            raise ValueError(
                f"State at {path or 'the top'} has an unknown kind {kind!r}; "
                f"expected one of {sorted(RECORDS)}."
            )
        missing = [name for name in record._fields if name not in data]
        if missing:
            where = path or "the top"
            raise ValueError(
                f"State is truncated: field {missing[0]} of {kind} is missing at {where}."
            )
        extra = sorted(set(data) - set(record._fields) - {"kind"})
        if extra:
            raise ValueError(
                f"State field {extra[0]} is not part of {kind} (at {path or 'the top'})."
            )
        return record(
            *(from_dict(data[name], f"{path}.{name}" if path else name) for name in record._fields)
        )
    if isinstance(data, list):
        return tuple(from_dict(value, f"{path}[{i}]") for i, value in enumerate(data))
    if isinstance(data, (bool, int)):
        return data
    field = path.rsplit(".", 1)[-1]
    allowed = {
        "stopped": "a bool",
        "parent": "a state dict",
        "components": "a list of state dicts",
    }.get(field, "an integer >= 0")
    raise ValueError(
        f"State field {path or 'at the top'} must be {allowed}, got {describe_value(data)}."
    )


def _same_definition(a: type, b: type) -> bool:
    # A module executed twice (pytest's importlib mode runs doctests this way) defines
    # its records again; those are the same record, not a clash.
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def _is_nonnegative_int(value: Any) -> bool:
    try:
        return operator.index(value) >= 0
    except TypeError:
        return False


def describe_value(value: Any) -> str:
    """A short repr of `value` with its type, for error messages."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"
