"""Combinators that combine or regroup streams: zip, interleave, rebatch.

Curried, configuration first, data last. `zip` also works on datasets;
`interleave` reads datasets or streams and yields a stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import toolz

from grainfn._src import validate
from grainfn._src.combinators.arguments import Data, as_stream
from grainfn._src.dataset import Dataset
from grainfn._src.interleave import InterleavedDatasetsStream, InterleavedStream
from grainfn._src.interleave import as_stream as interleaved_stream
from grainfn._src.rebatch import RebatchedStream
from grainfn._src.stream import Stream
from grainfn._src.zip import ZippedDataset, ZippedStream


def zip(data: Sequence[Data], *, strict: bool = False) -> Data:
    """Tuples of the i-th elements of several datasets, or of several streams.

    Datasets zip into a dataset as long as the shortest (epoch `e` reads the
    first positions of epoch `e` of each); streams zip into a stream that ends
    with its shortest component. With `strict`, components of different
    lengths are a ValueError, as in Python's `zip(..., strict=True)`.

    Args:
        data: A non-empty list of datasets, or of streams.
        strict: Whether the components must have equal lengths.

    Returns:
        A dataset of tuples, or a stream of tuples.

    Examples:
        >>> from grainfn.fn import from_dataset, iterate, range, source
        >>> zip([range(3), source("abcd")]).get_many([0, 1, 2, 3])
        [(0, 'a'), (1, 'b'), (2, 'c'), (0, 'a')]
        >>> list(iterate(zip([from_dataset(range(3)), from_dataset(source("ab"))])))
        [(0, 'a'), (1, 'b')]
    """
    if isinstance(data, Mapping):
        raise TypeError(
            f"zip takes a list of datasets or streams, got a {type(data).__name__} with keys "
            f"{sorted(map(str, data))}. Zip a list and map the tuples to dicts if needed."
        )
    components = _components(data, "zip")
    if all(isinstance(c, Dataset) for c in components):
        lengths = [c.length for c in components]
        if strict and any(length != lengths[0] for length in lengths):
            raise ValueError(
                f"zip(strict=True) needs datasets of equal length, got lengths {lengths}. Slice "
                "them to a common length first, or pass strict=False to zip to the shortest."
            )
        return ZippedDataset(components)
    if all(isinstance(c, Stream) for c in components):
        return ZippedStream(components, bool(strict))
    raise TypeError(
        "zip takes all datasets or all streams, got "
        f"{[type(c).__name__ for c in components]}; read the datasets as streams with "
        "fn.from_dataset first."
    )


@toolz.curry
def interleave(cycle_length: int, datasets: Sequence[Data] | Dataset[Any]) -> Stream[Any]:
    """Round robin over `cycle_length` open datasets, opening the next one as one runs out.

    The slots start with the first `cycle_length` datasets and are visited in
    turn, one element per visit. A dataset that runs out leaves its slot empty
    and the turn passes on; the next visit to that slot opens the next dataset
    there. So `cycle_length=1` chains the datasets and a `cycle_length` of at
    least their number takes one element from each in turn. This is the order
    of Grain's `InterleaveIterDataset`.

    Args:
        cycle_length: How many datasets are read at once, >= 1.
        datasets: A non-empty list of datasets and streams (a dataset is read
            in order, as `from_dataset` does), or a dataset whose elements are
            datasets or streams (a None element reads as an empty dataset).

    Returns:
        A stream whose state holds each slot's dataset and state, never data.

    Examples:
        >>> from grainfn.fn import iterate, map, range
        >>> list(iterate(interleave(2, [range(3), range(10, 12), range(20, 23)])))
        [0, 10, 1, 11, 2, 20, 21, 22]
        >>> shards = map(lambda i: range(10 * i, 10 * i + 2), range(3))
        >>> list(iterate(interleave(3, shards)))
        [0, 10, 20, 1, 11, 21]
    """
    cycle_length = validate.check_positive_int(cycle_length, "interleave cycle_length")
    if isinstance(datasets, Dataset):
        if datasets.length == 0:
            raise ValueError(
                "interleave needs at least one dataset, got a dataset of datasets of length 0."
            )
        return InterleavedDatasetsStream(datasets, cycle_length)
    if isinstance(datasets, Stream):
        raise TypeError(
            "interleave reads a list of datasets or a dataset of datasets, not a stream: it "
            "needs to know how many datasets there are. Pass a list or a dataset."
        )
    components = _components(datasets, "interleave")
    streams = tuple(interleaved_stream(c, i) for i, c in enumerate(components))
    return InterleavedStream(streams, cycle_length)


@toolz.curry
def rebatch(batch_size: int, stream: Stream[Any], *, drop_remainder: bool = False) -> Stream[Any]:
    """The rows of a stream of batches, regrouped into batches of `batch_size` rows.

    A batch is a pytree whose leaves share a leading dimension (the output of
    `batch`). Rows run on across parent batches; the last batch is shorter
    unless `drop_remainder`. Equal to Grain's `RebatchIterDataset`.

    Examples:
        >>> from grainfn.fn import batch, from_dataset, iterate, range
        >>> stream = batch(4, from_dataset(range(10)))
        >>> [b.tolist() for b in iterate(rebatch(3, stream))]
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """
    batch_size = validate.check_positive_int(batch_size, "rebatch batch_size", validate.INT64_MAX)
    if isinstance(stream, Dataset):
        raise TypeError(
            "rebatch regroups rows across batches, which needs a stream: apply it to "
            "fn.from_dataset(ds) (ds.to_iter_dataset() in the Grain API)."
        )
    return RebatchedStream(as_stream(stream, "rebatch"), batch_size, bool(drop_remainder))


def _components(data: Any, what: str) -> tuple[Any, ...]:
    """A non-empty list of datasets and streams as a tuple; a clear error for anything else."""
    if isinstance(data, (Dataset, Stream, str, bytes)) or not isinstance(data, Sequence):
        raise TypeError(f"{what} takes a list of grainfn datasets or streams, got {data!r}.")
    if not data:
        raise ValueError(f"{what} needs at least one dataset or stream, got an empty list.")
    for position, item in enumerate(data):
        if not isinstance(item, (Dataset, Stream)):
            raise TypeError(
                f"{what} takes grainfn datasets or streams, but item {position} is {item!r} of "
                f"type {type(item).__name__}."
            )
    return tuple(data)
