"""Iteration states: small frozen records, and their versioned JSON-able form.

A stream's state is a nest of the records below, one per stateful stage, with
the same shape for the stream's whole life. Records are NamedTuples, so they
are also JAX pytrees whose leaves are plain integers and booleans. The state
never holds data: only positions and counters, and, in a field named
`user_state`, the state a user's own iterator gave (JSON data, kept as is).
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple, TypeGuard, TypeVar

import numpy as np

from grainfn._src.core import validate

USER_STATE = "user_state"
"""The record field that holds a user iterator's own state: JSON data, kept as is."""


class DatasetPosition(NamedTuple):
    """State of `from_dataset`: the position of the next element to read."""

    position: int


class EpochPosition(NamedTuple):
    """State of a `to_jax` step: position `epoch * period + offset` of the dataset repeated.

    A compiled dataset does not end on device: past its length it reads the
    next epoch. So this state belongs to the host stream
    `from_dataset(repeat(None, ds))`, and converts to and from its
    `DatasetPosition` with the `to_jax` value (`fn.state_to_dict(jds, state)`).
    `period` is the dataset's length where that is below 2**31, and 2**31
    otherwise (an endless dataset), so both fields fit int32 and mean the
    same in both integer modes.
    """

    epoch: int
    offset: int


class SavedEpochPosition(NamedTuple):
    """An `EpochPosition` as it is saved: with the fingerprint of the pipeline it belongs to.

    `jds.saved_state(state)` makes one to save (in an Orbax checkpoint with
    the model), and `jds.device_state(saved)` restores it, refusing it unless
    `pipeline` is that `to_jax` value's fingerprint: 16 int32s, a 31-bit
    digest of each line of the pipeline's description (the lines
    `fn.state_to_dict` saves). `step` takes only the `EpochPosition` restored
    from it, so the fingerprint is checked outside jit and never carried
    through a step.
    """

    epoch: int
    offset: int
    pipeline: Any


RECORDS: dict[str, type[Any]] = {record.__name__: record for record in (DatasetPosition,)}
"""The state records `from_dict` can rebuild, by name. Stages defined elsewhere add theirs
with `register`."""

R = TypeVar("R", bound=type)

Parent = TypeVar("Parent")
"""The state of a stage's parent, inside the stage's record: `LimitState[DatasetPosition]`."""


def register(record: R | None = None, *, former_names: tuple[str, ...] = ()) -> Any:
    """Makes a stage's own state record (a NamedTuple) readable by `from_dict`.

    Use it as a class decorator next to the stage that owns the record.
    `check_record` reads fields by name: `parent` and `components` hold parent
    states (the stage checks them), `stopped` is a bool, `user_state` holds
    JSON data that user code wrote (checked when the state is written, see
    `json_data`), and every other field is a counter (an integer >= 0), so a
    state stays positions and counters. A record that was renamed keeps its
    `former_names`, so that states saved under them still read.

    Examples:
        >>> from typing import NamedTuple
        >>> @register
        ... class ExampleState(NamedTuple):
        ...     emitted: int
        ...     parent: Any
        >>> from_dict(to_dict(ExampleState(2, DatasetPosition(5))))
        ExampleState(emitted=2, parent=DatasetPosition(position=5))
        >>> @register(former_names=("OldExampleState",))
        ... class RenamedState(NamedTuple):
        ...     emitted: int
        >>> from_dict({"kind": "OldExampleState", "emitted": 1})
        RenamedState(emitted=1)
    """
    if record is None:
        return lambda record: _register(record, former_names)
    return _register(record, former_names)


def _register(record: R, former_names: tuple[str, ...]) -> R:
    if not (isinstance(record, type) and issubclass(record, tuple) and hasattr(record, "_fields")):
        raise TypeError(f"register takes a NamedTuple class, got {record!r}.")
    for name in (record.__name__, *former_names):
        known = RECORDS.get(name)
        if known is not None and not _same_definition(known, record):
            raise ValueError(
                f"A state record named {name} is already registered ({known!r}); "
                "give the new record another name."
            )
        RECORDS[name] = record
    return record


def as_host(state: Any) -> Any:
    """`state` with 0-d integer and bool arrays (numpy or jax) as Python ints and bools.

    A state that went through `jax.jit` holds such arrays; the host's readers
    work on Python numbers. Any other value is left for `check_state` to judge.

    Examples:
        >>> as_host(DatasetPosition(np.int32(7)))
        DatasetPosition(position=7)
        >>> as_host((np.array(True), 3))
        (True, 3)
    """
    if isinstance(state, tuple):
        values = [as_host(value) for value in state]
        return type(state)(*values) if hasattr(state, "_fields") else tuple(values)
    if isinstance(state, (bool, int)):
        return state
    dtype = getattr(state, "dtype", None)
    if dtype is None or getattr(state, "shape", None) != ():
        return state
    kind = np.dtype(dtype).kind
    if kind == "b":
        return bool(state)
    if kind in "iu":
        return int(state)
    return state


def check_record(state: Any, expected: type[Any], stage: str, path: str) -> None:
    """Raises ValueError unless `state` is an `expected` record with valid counters."""
    if not isinstance(state, expected):
        raise ValueError(
            f"State does not fit this pipeline at {path or 'the top'}: the stage {stage} "
            f"expects a {expected.__name__}, got {describe_value(state)}."
        )
    for name, value in zip(state._fields, state):
        if name in ("parent", "components", USER_STATE):
            continue
        where = f"{path}.{name}" if path else name
        if name == "stopped":
            if not isinstance(as_host(value), bool):
                raise ValueError(
                    f"State field {where} must be a bool, got {describe_value(value)}."
                )
        elif (number := validate.integer_or_none(value)) is None or number < 0:
            raise ValueError(
                f"State field {where} must be an integer >= 0, got {describe_value(value)}."
            )


def check_at_most(value: int, bound: int | None, path: str, name: str, what: str) -> None:
    """Raises ValueError, naming the field, if counter `value` is past `bound` (None: no bound).

    `what` says where the bound comes from.

    Examples:
        >>> check_at_most(12, 5, "parent", "taken", "the limit")
        Traceback (most recent call last):
        ...
        ValueError: State field parent.taken is 12, but at most 5 fits the limit; this state \
belongs to another pipeline, or was changed.
    """
    if bound is not None and value > bound:
        where = f"{path}.{name}" if path else name
        raise ValueError(
            f"State field {where} is {value}, but at most {bound} fits {what}; this state "
            "belongs to another pipeline, or was changed."
        )


def to_dict(state: Any) -> Any:
    """Turns a state record nest into JSON-able dicts, lists, ints and bools.

    A `user_state` field is written as the JSON data it holds (see `json_data`).

    Raises:
        TypeError: if a `user_state` field holds something other than JSON data.

    Examples:
        >>> from grainfn.fn import IndexedState
        >>> to_dict(IndexedState(seen=3, parent=DatasetPosition(7)))
        {'kind': 'IndexedState', 'seen': 3, 'parent': {'kind': 'DatasetPosition', 'position': 7}}
    """
    if isinstance(state, tuple) and hasattr(state, "_fields"):
        out: dict[str, Any] = {"kind": type(state).__name__}
        out.update(
            {
                name: json_data(value, name) if name == USER_STATE else to_dict(value)
                for name, value in zip(state._fields, state)
            }
        )
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
                f"State at {path or 'the top'} has an unknown kind {validate.short_repr(kind)}; "
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
        return record(*(_field_from_dict(data[name], name, path) for name in record._fields))
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


def _field_from_dict(data: Any, name: str, path: str) -> Any:
    where = f"{path}.{name}" if path else name
    if name == USER_STATE:
        try:
            return json_data(data, where)
        except TypeError as error:
            raise ValueError(str(error)) from None
    return from_dict(data, where)


_JSON_LEAVES = (str, int, float, bool, type(None))


def json_data(value: Any, path: str = USER_STATE) -> Any:
    """A copy of `value`, which must be JSON data that a JSON round trip gives back unchanged.

    That is dicts with str keys, lists, str, int, float, bool and None (no
    tuples: they would come back as lists; no numpy values). `path` names
    `value` in the error.

    Raises:
        TypeError: naming the first value of another type and where it is.

    Examples:
        >>> json_data({"files": ["a", "b"], "offset": 3})
        {'files': ['a', 'b'], 'offset': 3}
        >>> json_data({"offset": (3, 4)})
        Traceback (most recent call last):
        ...
        TypeError: State field user_state['offset'] holds (3, 4) (tuple): ... (a tuple would
        come back as a list).
    """
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"State field {path} has the key {describe_value(key)}: a user iterator's "
                    "state is kept as JSON data, whose dict keys are str."
                )
            out[key] = json_data(item, f"{path}[{key!r}]")
        return out
    if isinstance(value, list):
        return [json_data(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if type(value) in _JSON_LEAVES:  # not a subclass: numpy's float64 is one of float
        return value
    hint = " (a tuple would come back as a list)" if isinstance(value, tuple) else ""
    raise TypeError(
        f"State field {path} holds {describe_value(value)}: a user iterator's state is kept as "
        "JSON data, so it must be made of dicts with str keys, lists, str, int, float, bool and "
        f"None{hint}."
    )


def _same_definition(a: type, b: type) -> bool:
    # A module executed twice (pytest's importlib mode runs doctests this way) defines
    # its records again; those are the same record, not a clash.
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def is_saved_count(value: Any, least: int = 0) -> TypeGuard[int]:
    """Whether `value` is a count as a saved (JSON) state holds one: an int >= `least`, no bool.

    Examples:
        >>> is_saved_count(3), is_saved_count(True), is_saved_count(3.0), is_saved_count(0, 1)
        (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def describe_value(value: Any) -> str:
    """A short repr of `value` with its type, for error messages (see `validate.short_repr`)."""
    return f"{validate.short_repr(value)} ({type(value).__name__})"
