"""Combinators that decide which position reads what: sources, streams, mixing and order.

Curried, configuration first, data last. Each accepts a Dataset or, where the
operation makes sense on a sequence read in order, a Stream, and returns a new
value of the same kind.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import toolz

from grainfn._src import index_ops, stream_ops, validate
from grainfn._src.combinators.arguments import (
    Data,
    as_components,
    as_dataset,
    as_stream,
    op_seed,
)
from grainfn._src.dataset import INFINITE, Dataset
from grainfn._src.index import slicing
from grainfn._src.parallel.prefetch import PrefetchedStream
from grainfn._src.sources import RangeDataset, SourceDataset, check_source
from grainfn._src.stream import FromDatasetStream, Stream
from grainfn._src.window_shuffle_stream import WindowShuffledStream

T = TypeVar("T")


# Sources.


def range(start: int, stop: int | None = None, step: int = 1) -> Dataset[int]:
    """The integers of Python's `range(start, stop, step)`.

    Examples:
        >>> range(2, 9, 3).get_many([0, 1, 2, 3])
        [2, 5, 8, 2]
    """
    if stop is None:
        start, stop = 0, start
    start, stop, step = (
        validate.check_integer(start, "start"),
        validate.check_integer(stop, "stop"),
        validate.check_integer(step, "step"),
    )
    if step == 0:
        raise ValueError("range step must not be 0, got 0.")
    return RangeDataset(start, stop, step)


def source(data: Sequence[T] | Any) -> Dataset[T]:
    """The items of a Sequence or a random-access data source (`len` and `[]`).

    Examples:
        >>> source("abc").get(4)
        'b'
    """
    return SourceDataset(check_source(data))


@toolz.curry
def from_dataset(
    ds: Dataset[T], *, allow_nones: bool = False, threads: int = 0, buffer: int = 500
) -> Stream[T]:
    """The elements of `ds` in position order, as a stream with explicit state.

    Positions a filter emptied (None) are skipped unless `allow_nones`. With
    `threads > 0`, up to `threads` threads read up to `buffer` positions ahead
    once reading is measured to wait (slow files, network); cheap pipelines
    keep reading in the calling thread. Neither changes elements or states.

    Examples:
        >>> from grainfn._src.combinators.elements import filter
        >>> s = from_dataset(filter(lambda x: x % 2, range(6)))
        >>> element, state = s.step(s.init())
        >>> element, state
        (1, DatasetPosition(position=2))
    """
    ds = as_dataset(ds, "from_dataset")
    threads = validate.check_nonnegative_int(threads, "threads")
    buffer = validate.check_positive_int(buffer, "buffer")
    return FromDatasetStream(ds, bool(allow_nones), threads, buffer)


# Combining several datasets or streams.


def mix(
    datasets: Sequence[Data] | Mapping[str, Data],
    weights: Sequence[float] | Mapping[str, float] | None = None,
) -> Data:
    """Interleaves datasets (or streams) in proportion to `weights`, uniform by default.

    A mix of datasets ends where its first component would run out. A mix of
    streams stops when the component due next is exhausted (Grain's rule);
    streams may also be given as a dict of named components, with weights as a
    dict of the same names, or as a list in the dict's own order. Named
    components take turns in the order of their sorted names, as in Grain.

    Examples:
        >>> mix([range(5), range(7, 10)]).get_many(builtins.range(6))
        [0, 7, 1, 8, 2, 9]
        >>> from grainfn._src.reading import iterate
        >>> b, a = from_dataset(source("b" * 8)), from_dataset(source("a" * 8))
        >>> "".join(iterate(mix({"b": b, "a": a}, [3, 1])))  # b: 3, a: 1
        'abbbabbbabb'
    """
    names: tuple[str, ...] | None = None
    if isinstance(datasets, Mapping):
        names = tuple(sorted(datasets))
        if weights is not None and not isinstance(weights, Mapping):
            weights = dict(zip(datasets, validate.check_weights(weights, len(datasets))))
        datasets = [datasets[name] for name in names]
        if isinstance(weights, Mapping):
            if set(weights) != set(names):
                raise ValueError(
                    f"weights must name the same components as the datasets: "
                    f"got {sorted(weights)} for {list(names)}."
                )
            weights = [weights[name] for name in names]
    elif isinstance(weights, Mapping):
        raise TypeError("weights may be a dict only when the datasets are a dict of named streams.")
    components = as_components(datasets, "mix")
    weights = (1.0,) * len(components) if weights is None else weights
    checked = validate.check_weights(weights, len(components))
    if isinstance(components[0], Stream):
        return stream_ops.MixedStream(components, checked, names)
    if names is not None:
        raise TypeError("Named components are for streams; mix datasets as a list.")
    for position, component in enumerate(components):
        if component.length == 0:
            raise ValueError(
                f"Cannot mix an empty dataset: the dataset at position {position} has length 0."
            )
    return index_ops.MixedDataset(components, checked)


def concatenate(datasets: Sequence[Dataset[T]]) -> Dataset[T]:
    """The datasets one after another; epoch e of the result reads epoch e of each.

    Examples:
        >>> concatenate([range(2), range(5, 7)]).get_many(builtins.range(5))
        [0, 1, 5, 6, 0]
    """
    components = as_components(datasets, "concatenate", streams=False)
    for position, component in enumerate(components):
        if component.length >= INFINITE:
            raise ValueError(
                f"Cannot concatenate an infinite dataset (position {position}); "
                "concatenate finite datasets and repeat the result instead."
            )
    return index_ops.ConcatenatedDataset(components)


def select_from_datasets(datasets: Sequence[Dataset[T]], selection_map: Any) -> Dataset[T]:
    """Position `i` reads `datasets[d][k]` where `(d, k) = selection_map[i]`.

    `selection_map` needs `len()` (the length of the result) and `[]`.
    """
    components = as_components(datasets, "select_from_datasets", streams=False)
    if not (hasattr(selection_map, "__len__") and hasattr(selection_map, "__getitem__")):
        raise TypeError(
            f"selection_map must support len() and [] returning (dataset index, index), "
            f"got {selection_map!r}."
        )
    return index_ops.SelectedDataset(components, selection_map)


# One dataset or stream in, one out.


@toolz.curry
def seed(seed: int, data: Data) -> Data:
    """Seeds every random stage downstream that has no explicit seed.

    Each such stage derives its own seed from `seed` and its distance from this
    stage, exactly as Grain does.

    Examples:
        >>> a = shuffle(seed(0, range(100)))
        >>> b = shuffle(seed(0, range(100)))
        >>> a.get_many(builtins.range(5)) == b.get_many(builtins.range(5))
        True
    """
    checked = validate.check_seed(seed)
    if isinstance(data, Stream):
        return stream_ops.SeededStream(data, checked)
    return index_ops.SeededDataset(as_dataset(data, "seed"), checked)


@toolz.curry
def shuffle(ds: Dataset[T], *, seed: int | None = None) -> Dataset[T]:
    """A new pseudorandom permutation of `ds` in every epoch.

    The permutation is computed per index in O(1) memory, for any length up to
    2**63 - 1, and is the same as Grain's for the same seed.

    Examples:
        >>> ds = shuffle(range(5), seed=1)
        >>> sorted(ds.get_many(builtins.range(5)))
        [0, 1, 2, 3, 4]
    """
    ds = as_dataset(ds, "shuffle")
    return index_ops.ShuffledDataset(ds, op_seed(seed, ds, "shuffle"))


@toolz.curry
def window_shuffle(window_size: int, data: Data, *, seed: int | None = None) -> Data:
    """A new permutation inside each window of `window_size` consecutive positions.

    Elements move at most `window_size - 1` positions, so reads stay local (a
    cheap shuffle for sources that are slow to read at random). On a dataset,
    each epoch draws new permutations and full windows match Grain's
    `WindowShuffleMapDataset`. On a stream, window `k` of consecutive elements
    is permuted with seed `seed + k` and the output equals Grain's
    `WindowShuffleIterDataset`; the state holds positions, never the window.

    Examples:
        >>> ds = window_shuffle(4, range(10), seed=3)
        >>> [sorted(ds.get_many(w)) for w in ([0, 1, 2, 3], [8, 9])]
        [[0, 1, 2, 3], [8, 9]]
        >>> from grainfn._src.reading import iterate
        >>> out = list(iterate(window_shuffle(4, from_dataset(range(10)), seed=3)))
        >>> sorted(out[:4]), sorted(out[8:])
        ([0, 1, 2, 3], [8, 9])
    """
    window_size = validate.check_positive_int(window_size, "window_size")
    if isinstance(data, Stream):
        seed = op_seed(seed, data, "window_shuffle")
        return WindowShuffledStream(data, window_size, seed)
    ds = as_dataset(data, "window_shuffle")
    return index_ops.WindowShuffledDataset(ds, window_size, op_seed(seed, ds, "window_shuffle"))


@toolz.curry
def slice(positions: builtins.slice | Sequence[int], ds: Dataset[T]) -> Dataset[T]:
    """The positions of `ds` selected by a Python slice or a sequence of indices.

    Examples:
        >>> slice(builtins.slice(None, None, -2), range(6)).get_many([0, 1, 2])
        [5, 3, 1]
        >>> slice([4, 0], range(6)).get_many([0, 1])
        [4, 0]
    """
    ds = as_dataset(ds, "slice")
    if isinstance(positions, builtins.slice):
        for name in ("start", "stop", "step"):
            value = getattr(positions, name)
            if value is not None and not validate.is_integer(value):
                raise TypeError(
                    f"slice {name} must be an integer or None, got {value!r} of type "
                    f"{type(value).__name__} in {positions!r}."
                )
        if positions.step == 0:
            raise ValueError(f"slice step must not be 0, got {positions!r}.")
        start, step, size = slicing.slice_params(positions, ds.length)
        return index_ops.SlicedDataset(ds, start, step, size)
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence | np.ndarray):
        raise TypeError(
            f"slice takes a slice or a sequence of integer positions, got {positions!r}."
        )
    table = slicing.index_table(positions, ds.length)
    return index_ops.TakenDataset(ds, tuple(table.tolist()))


@toolz.curry
def repeat(num_epochs: int | None, data: Data, *, reseed_each_epoch: bool = True) -> Data:
    """`data` repeated `num_epochs` times, or forever for None.

    A repeated dataset has length `num_epochs * length` (`sys.maxsize` if
    forever) and each repetition is a new epoch (new shuffle, new draws) unless
    `reseed_each_epoch=False`. A repeated stream restarts its parent from the
    initial state, so it yields the same elements each time.

    Examples:
        >>> repeat(2, range(3)).get_many(builtins.range(6))
        [0, 1, 2, 0, 1, 2]
    """
    if isinstance(num_epochs, (Dataset, Stream)):
        raise TypeError(
            "repeat(num_epochs, data) takes the data last; "
            "use repeat(None, data) to repeat forever."
        )
    if num_epochs is not None:
        num_epochs = validate.check_positive_int(num_epochs, "num_epochs", validate.INT64_MAX)
    if isinstance(data, Stream):
        if not reseed_each_epoch:
            raise ValueError("reseed_each_epoch applies to datasets; a repeated stream restarts.")
        return stream_ops.RepeatedStream(data, num_epochs)
    ds = as_dataset(data, "repeat")
    if ds.length >= INFINITE:
        raise ValueError(f"Cannot repeat an infinite dataset:\n{ds!r}")
    return index_ops.RepeatedDataset(ds, num_epochs, bool(reseed_each_epoch))


@toolz.curry
def mp_prefetch(
    num_workers: int,
    data: Stream[T] | Dataset[T],
    *,
    buffer_per_worker: int = 1,
    worker_init_fn: Callable[[int, int], Any] | None = None,
) -> Stream[T]:
    """The stream with its dataset reads done ahead by `num_workers` worker processes.

    Everything map-level (the datasets under each `from_dataset`) runs in the
    workers; the stream stages above run here, on blocks that come back in
    position order. Elements and states are those of the stream itself, for
    any number of workers (0 runs everything here).

    Examples:
        >>> stream = mp_prefetch(0, from_dataset(range(4)))
        >>> from grainfn._src.reading import iterate
        >>> list(iterate(stream))
        [0, 1, 2, 3]
    """
    num_workers = validate.check_nonnegative_int(num_workers, "num_workers")
    buffer_per_worker = validate.check_positive_int(buffer_per_worker, "buffer_per_worker")
    if worker_init_fn is not None:
        validate.check_callable(worker_init_fn, "worker_init_fn")
    if isinstance(data, Dataset):
        data = FromDatasetStream(data)
    stream = as_stream(data, "mp_prefetch")
    return PrefetchedStream(stream, num_workers, buffer_per_worker, worker_init_fn)


@toolz.curry
def limit(count: int, stream: Stream[T]) -> Stream[T]:
    """The first `count` elements of a stream.

    Examples:
        >>> from grainfn._src.reading import iterate
        >>> list(iterate(limit(2, from_dataset(range(5)))))
        [0, 1]
    """
    count = validate.check_positive_int(count, "count")
    return stream_ops.LimitedStream(as_stream(stream, "limit"), count)
