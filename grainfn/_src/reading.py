"""Reading datasets and streams: in-order iteration, stepping, and state conversion."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np

from grainfn._src import state as records
from grainfn._src import validate
from grainfn._src.dataset import Dataset, pipeline_lines
from grainfn._src.parallel.threads import BlockSizer
from grainfn._src.stream import FromDatasetStream, Stream, StreamIterator

T = TypeVar("T")


def elements(
    ds: Dataset[T], start: int = 0, stop: int | None = None, *, allow_nones: bool = False
) -> Iterator[T | None]:
    """Yields the elements at positions `start, start + 1, ...` up to `stop` (default: `length`).

    Positions are read in blocks whose index math is resolved in one call; the
    first blocks are small so the first element comes quickly. Filtered-out
    positions (None) are skipped unless `allow_nones`.

    Examples:
        >>> from grainfn import fn
        >>> list(elements(fn.filter(lambda x: x > 5, fn.range(8))))
        [6, 7]
        >>> list(elements(fn.range(8), start=6, stop=10))
        [6, 7, 0, 1]
    """
    if not isinstance(ds, Dataset):
        raise TypeError(f"elements reads a grainfn Dataset, got {type(ds).__name__}.")
    start = validate.check_integer(start, "start")
    stop = ds.length if stop is None else validate.check_integer(stop, "stop")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}.")
    sizer = BlockSizer()
    position = start
    while position < stop:
        end = min(stop, position + sizer.start())
        block = ds._get_many(np.arange(position, end, dtype=np.int64))
        sizer.done()
        yield from (block if allow_nones else [e for e in block if e is not None])
        position = end


def iterate(data: Stream[T] | Dataset[T], state: Any = None) -> StreamIterator[T]:
    """Iterates a stream fast from `state` (default: the start); `.state` is exact at any point.

    A dataset is read as `from_dataset(data)`. Blocks of positions are resolved
    at once, and a state record is built only when `.state` is read.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.batch(2, fn.from_dataset(fn.range(5)))
        >>> it = iterate(stream)
        >>> next(it)
        array([0, 1])
        >>> saved = it.state
        >>> [b.tolist() for b in iterate(stream, saved)]
        [[2, 3], [4]]
    """
    return StreamIterator(as_stream(data, "iterate"), state)


def as_stream(data: Stream[T] | Dataset[T], what: str) -> Stream[T]:
    """`data` if it is a stream, or a dataset read in order with `from_dataset`."""
    if isinstance(data, Dataset):
        return FromDatasetStream(data)
    if not isinstance(data, Stream):
        raise TypeError(
            f"{what} needs a grainfn Stream or Dataset, got {data!r} of type {type(data).__name__}."
        )
    return data


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

    Examples:
        >>> from grainfn import fn
        >>> codec = StateCodec(fn.from_dataset(fn.range(3)))
        >>> codec.decode(codec.encode(fn.DatasetPosition(2)))
        DatasetPosition(position=2)
    """

    def __init__(self, stream: Stream[Any]) -> None:
        self.stream = stream
        self.pipeline = pipeline_lines(stream)

    def encode(self, state: Any) -> dict[str, Any]:
        """The dict form of a state of this stream (not checked: see `state_to_dict`)."""
        return {
            "version": records.STATE_VERSION,
            "pipeline": list(self.pipeline),
            "state": records.to_dict(state),
        }

    def decode(self, data: Any) -> Any:
        """The state record of `data`, refusing one of another pipeline or version."""
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
        if data["version"] != records.STATE_VERSION:
            raise ValueError(
                f"State version {data['version']!r} is not supported: this grainfn reads "
                f"version {records.STATE_VERSION}."
            )
        if data["pipeline"] != self.pipeline:
            raise ValueError(_pipeline_difference(self.pipeline, data["pipeline"]))
        state = records.from_dict(data["state"])
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
