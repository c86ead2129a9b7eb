"""Iteration states: small frozen records, and their versioned JSON-able form.

A stream's state is a nest of the records below, one per stateful stage, with
the same shape for the stream's whole life. Records are NamedTuples, so they
are also JAX pytrees whose leaves are plain integers and booleans. The state
never holds data: only positions and counters, and, in a field named
`user_state`, the state a user's own iterator gave (JSON data, kept as is).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from grainfn._src.core import fingerprints as fingerprints_lib
from grainfn._src.core.dataset import pipeline_lines

if TYPE_CHECKING:
    from grainfn._src.core.stream import Stream

STATE_VERSION = 1
"""The version of the dict form written by `to_dict`; `from_dict` reads only this one."""


USER_STATE = "user_state"
"""The record field that holds a user iterator's own state: JSON data, kept as is."""


class DatasetPosition(NamedTuple):
    """State of `from_dataset`: the position of the next element to read."""

    position: int


RECORDS: dict[str, type[Any]] = {record.__name__: record for record in (DatasetPosition,)}
"""The state records `from_dict` can rebuild, by name. Stages defined elsewhere add theirs
with `register`."""

R = TypeVar("R", bound=type)


def register(record: R) -> R:
    """Makes a stage's own state record (a NamedTuple) readable by `from_dict`.

    Use it as a class decorator next to the stage that owns the record.
    `check_record` reads fields by name: `parent` and `components` hold parent
    states (the stage checks them), `stopped` is a bool, `user_state` holds
    JSON data that user code wrote (checked when the state is written, see
    `json_data`), and every other field is a counter (an integer >= 0), so a
    state stays positions and counters.

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
        elif isinstance(value, bool) or not _is_nonnegative_int(value):
            raise ValueError(
                f"State field {where} must be an integer >= 0, got {describe_value(value)}."
            )


def to_dict(state: Any) -> Any:
    """Turns a state record nest into JSON-able dicts, lists, ints and bools.

    A `user_state` field is written as the JSON data it holds (see `json_data`).

    Raises:
        TypeError: if a `user_state` field holds something other than JSON data.

    Examples:
        >>> from grainfn.fn import CountState
        >>> to_dict(CountState(seen=3, parent=DatasetPosition(7)))
        {'kind': 'CountState', 'seen': 3, 'parent': {'kind': 'DatasetPosition', 'position': 7}}
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


def state_to_dict(stream: Stream[Any], state: Any) -> dict[str, Any]:
    """The JSON-able form of `state`: versioned, and naming the pipeline it belongs to.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(3))
        >>> saved = state_to_dict(stream, stream.init())
        >>> saved["version"], saved["state"]
        (1, {'kind': 'DatasetPosition', 'position': 0})
        >>> saved["pipeline"]
        ['from_dataset()', '  range(0, 3, 1)  [length 3]']
    """
    state = as_host(state)
    stream.check_state(state)
    return StateCodec(stream).encode(state)


def state_from_dict(stream: Stream[Any], data: Any) -> Any:
    """Rebuilds a state from `state_to_dict`'s form, refusing one of another pipeline or version.

    Raises:
        ValueError: naming the version, the first differing pipeline stage, or
            the missing or mistyped field.
    """
    return StateCodec(stream).decode(data)


class StateCodec:
    """The dict form of one stream's states, with the pipeline description computed once.

    A pipeline that reads files (ArrayRecord, Parquet, TFRecord) also records
    a fingerprint of each in `"files"` (its size and a digest of its first and
    last 4 KiB, see `grainfn._src.core.fingerprints`). They are taken on the
    first `encode` (and again by a `decode` that checks them), so `encode`
    reads no file after that.
    `decode` refuses a state whose files have changed since it was saved; a
    state without `"files"` (written before grainfn recorded them) is not checked.

    Examples:
        >>> from grainfn import fn
        >>> codec = StateCodec(fn.from_dataset(fn.range(3)))
        >>> codec.decode(codec.encode(fn.DatasetPosition(2)))
        DatasetPosition(position=2)
    """

    def __init__(self, stream: Stream[Any]) -> None:
        self.stream = stream
        self.pipeline = pipeline_lines(stream)
        self.files = fingerprints_lib.files_read(stream)
        self._fingerprints: dict[str, str] | None = None

    def fingerprints(self) -> dict[str, str]:
        """The fingerprints of the pipeline's files, taken on the first call (not a copy)."""
        if self._fingerprints is None:
            self._fingerprints = fingerprints_lib.fingerprints(self.files)
        return self._fingerprints

    def encode(self, state: Any) -> dict[str, Any]:
        """The dict form of a state of this stream (not checked: see `state_to_dict`)."""
        data = {
            "version": STATE_VERSION,
            "pipeline": list(self.pipeline),
            "state": to_dict(state),
        }
        if self.files:
            data["files"] = dict(self.fingerprints())
        return data

    def decode(self, data: Any) -> Any:
        """The state record of `data`, refusing one of another pipeline or version.

        Also refused: a state whose `"files"` fingerprints differ from the
        files' now (the message names the file and what changed).
        """
        if not isinstance(data, dict):
            raise ValueError(f"A state dict is expected, got {type(data).__name__}.")
        if "version" not in data and "pipeline" not in data:
            raise ValueError(
                f"This state was not written by grainfn (its keys are {sorted(map(str, data))}). "
                "Pass a dict that get_state (or fn.state_to_dict) returned for this pipeline."
            )
        for key in ("version", "pipeline", "state"):
            if key not in data:
                raise ValueError(f"State dict is truncated: key {key!r} is missing.")
        if data["version"] != STATE_VERSION:
            raise ValueError(
                f"State version {data['version']!r} is not supported: this grainfn reads "
                f"version {STATE_VERSION}."
            )
        if data["pipeline"] != self.pipeline:
            raise ValueError(_pipeline_difference(self.pipeline, data["pipeline"]))
        if "files" in data:
            current = fingerprints_lib.fingerprints(self.files)
            problem = fingerprints_lib.changed_files(self.files, current, data["files"])
            if problem is not None:
                raise ValueError(problem)
            self._fingerprints = current
        state = from_dict(data["state"])
        self.stream.check_state(state)
        return state


def _pipeline_difference(ours: list[str], theirs: Any) -> str:
    if not isinstance(theirs, list):
        return f"State dict field 'pipeline' must be a list of stage lines, got {theirs!r}."
    for line, (mine, other) in enumerate(zip(ours, theirs)):
        if mine != other:
            return (
                f"State belongs to another pipeline: stage line {line} is {other.strip()!r} in the "
                f"state but {mine.strip()!r} here."
            )
    return (
        f"State belongs to another pipeline: it describes {len(theirs)} stage lines, this "
        f"pipeline has {len(ours)}."
    )
