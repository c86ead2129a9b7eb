"""Combinators that compute elements: map, random_map, map_with_index, flat_map, filter, batch.

Curried, configuration first, data last; each works on a Dataset and on a Stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import toolz

from grainfn._src import element_ops, stream_ops, validate
from grainfn._src.combinators.arguments import Data, as_dataset, op_seed
from grainfn._src.flat_map import FlatMappedDataset, FlatMappedStream
from grainfn._src.stream import Stream


@toolz.curry
def map(fn: Callable[[Any], Any], data: Data) -> Data:
    """`fn(element)` for every element.

    Examples:
        >>> from grainfn.fn import range
        >>> map(lambda x: x * x, range(4)).get_many([0, 1, 2, 3])
        [0, 1, 4, 9]
    """
    validate.check_callable(fn, "map fn")
    if isinstance(data, Stream):
        return stream_ops.MappedStream(data, fn)
    return element_ops.MappedDataset(as_dataset(data, "map"), fn)


@toolz.curry
def random_map(
    fn: Callable[[Any, np.random.Generator], Any], data: Data, *, seed: int | None = None
) -> Data:
    """`fn(element, rng)` with a generator that depends only on (seed, position).

    On a dataset the position is the index; on a stream it is the number of
    elements the stage has seen, as in Grain.

    Examples:
        >>> from grainfn.fn import range
        >>> ds = random_map(lambda x, rng: x + rng.integers(100), range(3), seed=7)
        >>> bool(ds.get(1) == ds.get(1))
        True
    """
    validate.check_callable(fn, "random_map fn")
    if isinstance(data, Stream):
        return stream_ops.RandomMappedStream(data, fn, op_seed(seed, data, "random_map"))
    ds = as_dataset(data, "random_map")
    return element_ops.RandomMappedDataset(ds, fn, op_seed(seed, ds, "random_map"))


@toolz.curry
def map_with_index(fn: Callable[[int, Any], Any], data: Data) -> Data:
    """`fn(index, element)`: the dataset index, or the element's count in a stream.

    Examples:
        >>> from grainfn.fn import source
        >>> map_with_index(lambda i, x: f"{x}{i}", source("ab")).get_many([0, 1, 2])
        ['a0', 'b1', 'a2']
    """
    validate.check_callable(fn, "map_with_index fn")
    if isinstance(data, Stream):
        return stream_ops.IndexMappedStream(data, fn)
    return element_ops.IndexMappedDataset(as_dataset(data, "map_with_index"), fn)


@toolz.curry
def flat_map(
    fn: Callable[[Any], Sequence[Any]], data: Data, *, max_fan_out: int | None = None
) -> Data:
    """Every element of `fn(element)` for every element.

    A stream yields all parts in order. A dataset keeps random access by giving
    each element `max_fan_out` positions: part `j` of element `k` sits at
    position `k * max_fan_out + j`, and positions past an element's last part
    are None (skipped when read as a stream).

    Examples:
        >>> from grainfn.fn import from_dataset, range
        >>> ds = flat_map(lambda x: [x] * x, range(3), max_fan_out=2)
        >>> ds.get_many([0, 1, 2, 3, 4, 5])
        [None, None, 1, None, 2, 2]
        >>> from grainfn._src.reading import iterate
        >>> list(iterate(flat_map(lambda x: [x] * x, from_dataset(range(4)))))
        [1, 2, 2, 3, 3, 3]
    """
    validate.check_callable(fn, "flat_map fn")
    if isinstance(data, Stream):
        if max_fan_out is not None:
            validate.check_positive_int(max_fan_out, "max_fan_out")
        return FlatMappedStream(data, fn)
    ds = as_dataset(data, "flat_map")
    if max_fan_out is None:
        raise ValueError(
            "flat_map on a dataset needs max_fan_out, the most parts one element may give: "
            "each element gets that many positions. A stream needs no bound."
        )
    fan_out = validate.check_positive_int(max_fan_out, "max_fan_out")
    return FlatMappedDataset(ds, fn, fan_out)


@toolz.curry
def filter(predicate: Callable[[Any], Any], data: Data) -> Data:
    """Keeps elements where `predicate` is true.

    In a dataset the others read as None (positions stay stable); a stream
    drops them.

    Examples:
        >>> from grainfn.fn import range
        >>> filter(lambda x: x % 2 == 0, range(4)).get_many([0, 1, 2, 3])
        [0, None, 2, None]
    """
    validate.check_callable(predicate, "filter predicate")
    if isinstance(data, Stream):
        return stream_ops.FilteredStream(data, predicate)
    return element_ops.FilteredDataset(as_dataset(data, "filter"), predicate)


@toolz.curry
def batch(
    batch_size: int,
    data: Data,
    *,
    drop_remainder: bool = False,
    batch_fn: Callable[[Sequence[Any]], Any] | None = None,
) -> Data:
    """Consecutive elements stacked leaf by leaf along a new first axis.

    A dataset batches every epoch on its own, so no batch mixes two epochs.
    With `batch_fn`, that function turns each list of elements into a batch.

    Examples:
        >>> from grainfn.fn import range
        >>> batch(2, range(5)).get_many([0, 2, 3])
        [array([0, 1]), array([4]), array([0, 1])]
    """
    batch_size = validate.check_positive_int(batch_size, "batch_size", validate.INT64_MAX)
    if batch_fn is not None:
        validate.check_callable(batch_fn, "batch_fn")
    if isinstance(data, Stream):
        return stream_ops.BatchedStream(data, batch_size, bool(drop_remainder), batch_fn)
    ds = as_dataset(data, "batch")
    if (found := element_ops.upstream_holes(ds)) is not None:
        raise ValueError(
            f"A map-level batch cannot follow {found.describe_stage()}: it leaves None holes, "
            "so batches would come out short. Batch the stream instead, which drops the holes "
            "first: fn.batch(n, fn.from_dataset(ds)), or ds.to_iter_dataset().batch(n) in the "
            "Grain API."
        )
    return element_ops.BatchedDataset(ds, batch_size, bool(drop_remainder), batch_fn)
