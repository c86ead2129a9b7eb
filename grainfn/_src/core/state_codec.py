"""The saved form of a stream's states: a versioned dict naming the pipeline and its files.

`StateCodec` turns a state record nest (`grainfn._src.core.state`) into the
JSON-able dict that `get_state()` returns, and back, refusing a dict of
another pipeline, version, or of files that have changed since.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grainfn._src.core import fingerprints as fingerprints_lib
from grainfn._src.core.dataset import Dataset, pipeline_lines
from grainfn._src.core.reading import HostTwin, as_stream
from grainfn._src.core.state import as_host, from_dict, to_dict
from grainfn._src.core.validate import short_repr

if TYPE_CHECKING:
    from grainfn._src.core.stream import Stream

STATE_VERSION = 1
"""The version of the dict form `StateCodec` writes; it reads only this one."""


def state_to_dict(stream: Stream[Any] | Dataset[Any] | HostTwin[Any], state: Any) -> dict[str, Any]:
    """The JSON-able form of `state`: versioned, and naming the pipeline it belongs to.

    A dataset stands for `from_dataset(dataset)`, as `iterate` reads it; a
    `to_jax` value for its host stream, and its state is converted to that
    stream's.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(3))
        >>> saved = state_to_dict(stream, stream.init())
        >>> saved["version"], saved["state"]
        (1, {'kind': 'DatasetPosition', 'position': 0})
        >>> saved["pipeline"]
        ['from_dataset()', '  range(0, 3, 1)  [length 3]']
        >>> state_to_dict(fn.range(3), stream.init()) == saved
        True
    """
    if isinstance(stream, HostTwin):
        state = stream.host_state(state)
    stream = as_stream(stream, "state_to_dict")
    state = as_host(state)
    stream.check_state(state)
    return StateCodec(stream).encode(state)


def state_from_dict(stream: Stream[Any] | Dataset[Any] | HostTwin[Any], data: Any) -> Any:
    """Rebuilds a state from `state_to_dict`'s form, refusing one of another pipeline or version.

    A dataset stands for `from_dataset(dataset)`, as `iterate` reads it; a
    `to_jax` value for its host stream, and the state comes as its own (one
    its `step` takes).

    Raises:
        ValueError: naming the version, the first differing pipeline stage, or
            the missing or mistyped field.
    """
    state = StateCodec(as_stream(stream, "state_from_dict")).decode(data)
    return stream.device_state(state) if isinstance(stream, HostTwin) else state


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
                f"State version {short_repr(data['version'])} is not supported: this "
                "grainfn reads "
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
        try:
            state = from_dict(data["state"])
        except RecursionError:  # no pipeline nests its states thousands deep
            raise ValueError(
                "State field 'state' is nested deeper than Python's recursion limit: it is "
                "not a state of this pipeline."
            ) from None
        self.stream.check_state(state)
        return state


def _pipeline_difference(ours: list[str], theirs: Any) -> str:
    if not isinstance(theirs, list):
        got = short_repr(theirs)
        return f"State dict field 'pipeline' must be a list of stage lines, got {got}."
    for line, (mine, other) in enumerate(zip(ours, theirs)):
        if mine != other:
            return (
                f"State belongs to another pipeline: stage line {line} is "
                f"{_quoted_line(other)} in the "
                f"state but {mine.strip()!r} here."
            )
    return (
        f"State belongs to another pipeline: it describes {len(theirs)} stage lines, this "
        f"pipeline has {len(ours)}."
    )


def _quoted_line(line: Any) -> str:
    """A stage line of a state, for a message: whole up to 500 characters, then cut."""
    if not isinstance(line, str):
        return short_repr(line)
    text = repr(line.strip())
    return text if len(text) <= 500 else text[:497] + "..."
