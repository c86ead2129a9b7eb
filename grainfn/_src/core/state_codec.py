"""The saved form of a stream's states: a versioned dict naming the pipeline and its files.

`StateCodec` turns a state record nest (`grainfn._src.core.state`) into the
JSON-able dict that `get_state()` returns, and back, refusing a dict of
another pipeline, version, or of files that have changed since. A state saved
as a few integers (a `to_jax` step's, in an Orbax checkpoint with a model)
holds its `pipeline_fingerprint` instead of the description: a digest of each
of the same lines, which `StateCodec.check_fingerprint` compares, so the two
forms refuse the same states.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grainfn._src.core import fingerprints as fingerprints_lib
from grainfn._src.core.dataset import Dataset, pipeline_lines
from grainfn._src.core.reading import HostTwin, as_stream
from grainfn._src.core.state import as_host, from_dict, to_dict
from grainfn._src.core.validate import short_repr

if TYPE_CHECKING:
    from grainfn._src.core.stream import Stream

STATE_VERSION = 1
"""The version of the dict form `StateCodec` writes; it reads only this one."""

FINGERPRINT_WORDS = 16
"""The integers of a pipeline fingerprint: one per stage line, the last for any lines past 15."""


def pipeline_fingerprint(lines: Sequence[str]) -> tuple[int, ...]:
    """A digest of each line of a pipeline's description (`pipeline_lines`), in 16 integers.

    The dict form saves the description whole and compares it line by line.
    A state saved as a few integers (a `to_jax` step's, in an Orbax
    checkpoint) keeps this instead: integer `i` is a 31-bit digest of stage
    line `i` for the first 15 lines, the last one a digest of all lines after
    those (few pipelines have any), and -1 stands for no line. So both forms
    refuse the same pipelines (a line and another share a digest with odds of
    1 in 2**31), and both name the lines that differ.

    Examples:
        >>> from grainfn import fn
        >>> from grainfn._src.core.dataset import pipeline_lines
        >>> def fingerprint(ds):
        ...     return pipeline_fingerprint(pipeline_lines(ds))
        >>> four = fingerprint(fn.batch(4, fn.range(40)))   # 2 lines: batch, range
        >>> four == fingerprint(fn.batch(4, fn.range(40)))
        True
        >>> eight = fingerprint(fn.batch(8, fn.range(40)))
        >>> [four[i] == eight[i] for i in range(3)], len(four), set(four[2:])
        ([False, True, True], 16, {-1})
    """
    head = [_digest(line) for line in lines[: FINGERPRINT_WORDS - 1]]
    rest = lines[FINGERPRINT_WORDS - 1 :]
    padding = [-1] * (FINGERPRINT_WORDS - 1 - len(head))
    return (*head, *padding, _digest("\n".join(rest)) if rest else -1)


def _digest(text: str) -> int:
    """A 31-bit digest of `text`: an int32 >= 0 in both of jax's integer modes."""
    import hashlib  # loads OpenSSL (3 ms): imported when a state is encoded, not with grainfn

    digest = hashlib.blake2b(text.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") >> 1


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
        self.fingerprint = pipeline_fingerprint(self.pipeline)
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

    def check_fingerprint(self, saved: Any, what: str) -> None:
        """Refuses a saved state's pipeline fingerprint unless it is this pipeline's.

        Args:
            saved: The fingerprint the state holds: the 16 integers of
                `pipeline_fingerprint`, as a sequence or an array.
            what: The state, as the message names it.

        Raises:
            ValueError: naming the stage lines that differ, as this pipeline
                has them, and what to do; or saying what a fingerprint is.

        Examples:
            >>> from grainfn import fn
            >>> codec = StateCodec(fn.from_dataset(fn.batch(4, fn.range(40))))
            >>> codec.check_fingerprint(codec.fingerprint, "The state")
            >>> other = StateCodec(fn.from_dataset(fn.batch(8, fn.range(40)))).fingerprint
            >>> codec.check_fingerprint(other, "The state")
            Traceback (most recent call last):
            ...
            ValueError: The state belongs to another pipeline: its fingerprint differs in stage \
line 1, 'batch(4)  [length 10]' here. ...
        """
        words = _fingerprint_words(saved)
        if words is None:
            raise ValueError(
                f"{what} holds pipeline fingerprint {short_repr(saved)}; it must be "
                f"{FINGERPRINT_WORDS} integers in [-1, 2**31 - 1], the ones saved_state gave."
            )
        differing = [i for i, (a, b) in enumerate(zip(self.fingerprint, words)) if a != b]
        if not differing:
            return
        where = "; ".join(self._line_here(i) for i in differing[:3])
        more = f"; and {len(differing) - 3} more" if len(differing) > 3 else ""
        raise ValueError(
            f"{what} belongs to another pipeline: its fingerprint differs in stage {where}{more}. "
            "A fingerprint holds a digest of each line of the pipeline's description (the "
            "lines fn.state_to_dict saves), so a stage or a parameter of one (a batch size, "
            "a seed, a source's length) differs from the pipeline the state was saved with, "
            "and its position would point into other data here. Restore it into the "
            "pipeline it was saved with, or start this one afresh."
        )

    def _line_here(self, word: int) -> str:
        """The stage lines that word `word` of a fingerprint digests, as this pipeline has them."""
        last, count = FINGERPRINT_WORDS - 1, len(self.pipeline)
        if word == last:
            if count <= last:
                return f"lines from {last} on, which this pipeline lacks"
            return f"lines {last} to {count - 1} (one or more of them)"
        if word >= count:
            return f"line {word}, which this pipeline lacks"
        return f"line {word}, {self.pipeline[word].strip()!r} here"


def _fingerprint_words(saved: Any) -> list[int] | None:
    """`saved` as the integers of a fingerprint, or None if it is not one."""
    try:
        array = np.asarray(saved)
    except (TypeError, ValueError):
        return None
    if array.shape != (FINGERPRINT_WORDS,) or array.dtype.kind not in "iu":
        return None
    words = [int(word) for word in array.tolist()]
    return words if all(-1 <= word < 2**31 for word in words) else None


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
