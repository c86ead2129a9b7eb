"""The functional API of grainfn: datasets as values, combinators as functions.

A dataset is an immutable record with a `length` and a pure `get(index)`.
Every combinator takes its configuration first and the dataset last, and is
curried, so a pipeline reads as a `toolz.pipe`:

>>> import toolz
>>> from grainfn import fn
>>> ds = toolz.pipe(fn.range(10), fn.seed(3), fn.shuffle(), fn.map(lambda x: x * 10))
>>> ds.length
10
>>> sorted(fn.elements(ds))
[0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
>>> list(fn.elements(fn.batch(4, fn.range(10))))
[array([0, 1, 2, 3]), array([4, 5, 6, 7]), array([8, 9])]

Indices past `length` address later epochs: a shuffle draws a new permutation
there, a random_map new numbers.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import toolz

from grainfn._src import validate
from grainfn._src.dataset import INFINITE, Dataset
from grainfn._src.element_ops import (
    BatchedDataset,
    FilteredDataset,
    IndexMappedDataset,
    MappedDataset,
    RandomMappedDataset,
    upstream_filter,
)
from grainfn._src.index import slicing
from grainfn._src.index.seeds import derive_seed
from grainfn._src.index_ops import (
    ConcatenatedDataset,
    MixedDataset,
    RepeatedDataset,
    SeededDataset,
    SelectedDataset,
    ShuffledDataset,
    SlicedDataset,
    TakenDataset,
)
from grainfn._src.sources import RangeDataset, SourceDataset, check_source

__all__ = [
    "Dataset",
    "batch",
    "concatenate",
    "elements",
    "filter",
    "map",
    "map_with_index",
    "mix",
    "random_map",
    "range",
    "repeat",
    "seed",
    "select_from_datasets",
    "shuffle",
    "slice",
    "source",
]

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
        _integer(v, name) for v, name in ((start, "start"), (stop, "stop"), (step, "step"))
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


def mix(datasets: Sequence[Dataset[T]], weights: Sequence[float] | None = None) -> Dataset[T]:
    """Interleaves datasets in proportion to `weights` (uniform by default).

    The mix ends where its first component would run out; repeat the
    components first for an endless mix.

    Examples:
        >>> mix([range(5), range(7, 10)]).get_many(builtins.range(6))
        [0, 7, 1, 8, 2, 9]
    """
    components = _datasets(datasets, "mix")
    weights = (1.0,) * len(components) if weights is None else weights
    checked = validate.check_weights(weights, len(components))
    for position, component in enumerate(components):
        if component.length == 0:
            raise ValueError(
                f"Cannot mix an empty dataset: the dataset at position {position} has length 0."
            )
    return MixedDataset(components, checked)


def concatenate(datasets: Sequence[Dataset[T]]) -> Dataset[T]:
    """The datasets one after another; epoch e of the result reads epoch e of each.

    Examples:
        >>> concatenate([range(2), range(5, 7)]).get_many(builtins.range(5))
        [0, 1, 5, 6, 0]
    """
    components = _datasets(datasets, "concatenate")
    for position, component in enumerate(components):
        if component.length >= INFINITE:
            raise ValueError(
                f"Cannot concatenate an infinite dataset (position {position}); "
                "concatenate finite datasets and repeat the result instead."
            )
    return ConcatenatedDataset(components)


def select_from_datasets(datasets: Sequence[Dataset[T]], selection_map: Any) -> Dataset[T]:
    """Position `i` reads `datasets[d][k]` where `(d, k) = selection_map[i]`.

    `selection_map` needs `len()` (the length of the result) and `[]`.
    """
    components = _datasets(datasets, "select_from_datasets")
    if not (hasattr(selection_map, "__len__") and hasattr(selection_map, "__getitem__")):
        raise TypeError(
            f"selection_map must support len() and [] returning (dataset index, index), "
            f"got {selection_map!r}."
        )
    return SelectedDataset(components, selection_map)


# Combinators: configuration first, dataset last, curried.


@toolz.curry
def seed(seed: int, ds: Dataset[T]) -> Dataset[T]:
    """Seeds every random stage downstream that has no explicit seed.

    Each such stage derives its own seed from `seed` and its distance from this
    stage, exactly as Grain does.

    Examples:
        >>> a = shuffle(seed(0, range(100)))
        >>> b = shuffle(seed(0, range(100)))
        >>> a.get_many(builtins.range(5)) == b.get_many(builtins.range(5))
        True
    """
    return SeededDataset(_dataset(ds, "seed"), validate.check_seed(seed))


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
    ds = _dataset(ds, "shuffle")
    return ShuffledDataset(ds, _op_seed(seed, ds, "shuffle"))


@toolz.curry
def slice(positions: builtins.slice | Sequence[int], ds: Dataset[T]) -> Dataset[T]:
    """The positions of `ds` selected by a Python slice or a sequence of indices.

    Examples:
        >>> slice(builtins.slice(None, None, -2), range(6)).get_many([0, 1, 2])
        [5, 3, 1]
        >>> slice([4, 0], range(6)).get_many([0, 1])
        [4, 0]
    """
    ds = _dataset(ds, "slice")
    if isinstance(positions, builtins.slice):
        if positions.step == 0:
            raise ValueError(f"slice step must not be 0, got {positions!r}.")
        start, step, size = slicing.slice_params(positions, ds.length)
        return SlicedDataset(ds, start, step, size)
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence | np.ndarray):
        raise TypeError(
            f"slice takes a slice or a sequence of integer positions, got {positions!r}."
        )
    table = slicing.index_table(positions, ds.length)
    return TakenDataset(ds, tuple(table.tolist()))


@toolz.curry
def repeat(num_epochs: int | None, ds: Dataset[T], *, reseed_each_epoch: bool = True) -> Dataset[T]:
    """`ds` repeated `num_epochs` times, or forever (length `sys.maxsize`) for None.

    Each repetition is a new epoch of `ds` unless `reseed_each_epoch=False`.

    Examples:
        >>> repeat(2, range(3)).get_many(builtins.range(6))
        [0, 1, 2, 0, 1, 2]
    """
    ds = _dataset(ds, "repeat")
    if isinstance(num_epochs, Dataset):
        raise TypeError(
            "repeat(num_epochs, ds) takes the dataset last; use repeat(None, ds) to repeat forever."
        )
    if num_epochs is not None:
        num_epochs = validate.check_positive_int(num_epochs, "num_epochs")
    if ds.length >= INFINITE:
        raise ValueError(f"Cannot repeat an infinite dataset:\n{ds!r}")
    return RepeatedDataset(ds, num_epochs, bool(reseed_each_epoch))


@toolz.curry
def map(fn: Callable[[Any], Any], ds: Dataset[Any]) -> Dataset[Any]:
    """`fn(element)` for every element.

    Examples:
        >>> map(lambda x: x * x, range(4)).get_many([0, 1, 2, 3])
        [0, 1, 4, 9]
    """
    return MappedDataset(_dataset(ds, "map"), validate.check_callable(fn, "map fn"))


@toolz.curry
def random_map(
    fn: Callable[[Any, np.random.Generator], Any], ds: Dataset[Any], *, seed: int | None = None
) -> Dataset[Any]:
    """`fn(element, rng)` with a generator that depends only on (seed, index).

    Examples:
        >>> ds = random_map(lambda x, rng: x + rng.integers(100), range(3), seed=7)
        >>> bool(ds.get(1) == ds.get(1))
        True
    """
    ds = _dataset(ds, "random_map")
    validate.check_callable(fn, "random_map fn")
    return RandomMappedDataset(ds, fn, _op_seed(seed, ds, "random_map"))


@toolz.curry
def map_with_index(fn: Callable[[int, Any], Any], ds: Dataset[Any]) -> Dataset[Any]:
    """`fn(index, element)` for every element.

    Examples:
        >>> map_with_index(lambda i, x: f"{x}{i}", source("ab")).get_many([0, 1, 2])
        ['a0', 'b1', 'a2']
    """
    return IndexMappedDataset(
        _dataset(ds, "map_with_index"), validate.check_callable(fn, "map_with_index fn")
    )


@toolz.curry
def filter(predicate: Callable[[Any], Any], ds: Dataset[T]) -> Dataset[T]:
    """Keeps elements where `predicate` is true; the others read as None.

    Examples:
        >>> filter(lambda x: x % 2 == 0, range(4)).get_many([0, 1, 2, 3])
        [0, None, 2, None]
    """
    return FilteredDataset(
        _dataset(ds, "filter"), validate.check_callable(predicate, "filter predicate")
    )


@toolz.curry
def batch(
    batch_size: int,
    ds: Dataset[Any],
    *,
    drop_remainder: bool = False,
    batch_fn: Callable[[Sequence[Any]], Any] | None = None,
) -> Dataset[Any]:
    """Consecutive elements stacked leaf by leaf along a new first axis.

    Every epoch is batched on its own, so no batch mixes two epochs. With
    `batch_fn`, that function turns each list of elements into a batch.

    Examples:
        >>> batch(2, range(5)).get_many([0, 2, 3])
        [array([0, 1]), array([4]), array([0, 1])]
    """
    ds = _dataset(ds, "batch")
    batch_size = validate.check_positive_int(batch_size, "batch_size")
    if batch_fn is not None:
        validate.check_callable(batch_fn, "batch_fn")
    if (found := upstream_filter(ds)) is not None:
        raise ValueError(
            f"A map-level batch cannot follow a filter ({found.describe_stage()}): filtered "
            "positions are holes, so batches would come out short. Batch at the stream level "
            "instead, after the filter has dropped the holes, or batch before filtering."
        )
    return BatchedDataset(ds, batch_size, bool(drop_remainder), batch_fn)


# Reading.


def elements(
    ds: Dataset[T],
    start: int = 0,
    stop: int | None = None,
    *,
    allow_nones: bool = False,
    block_size: int = 512,
) -> Iterator[T | None]:
    """Yields the elements at positions `start, start + 1, ...` up to `stop` (default: `length`).

    Positions are read in blocks whose index math is resolved in one call; the
    first blocks are small so the first element comes quickly. Filtered-out
    positions (None) are skipped unless `allow_nones`.

    Examples:
        >>> list(elements(filter(lambda x: x > 5, range(8))))
        [6, 7]
        >>> list(elements(range(8), start=6, stop=10))
        [6, 7, 0, 1]
    """
    ds = _dataset(ds, "elements")
    start = _integer(start, "start")
    stop = ds.length if stop is None else _integer(stop, "stop")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}.")
    block_size = validate.check_positive_int(block_size, "block_size")
    size = min(8, block_size)
    position = start
    while position < stop:
        end = builtins.min(stop, position + size)
        block = ds._get_many(np.arange(position, end, dtype=np.int64))
        if allow_nones:
            yield from block
        else:
            yield from (e for e in block if e is not None)
        position = end
        size = builtins.min(block_size, size * 2)


def _op_seed(seed: int | None, ds: Dataset[Any], what: str) -> int:
    if seed is not None:
        return validate.check_seed(seed, f"{what} seed")
    derived = derive_seed([ds])
    if derived is None:
        raise ValueError(
            f"{what} needs a seed: pass seed=... or call fn.seed(s, ds) upstream to seed every "
            "random stage below it."
        )
    return derived


def _dataset(ds: Any, what: str) -> Dataset[Any]:
    if not isinstance(ds, Dataset):
        raise TypeError(
            f"{what} expects a grainfn Dataset as its last argument, got {ds!r} of type "
            f"{type(ds).__name__}. Build one with fn.range or fn.source."
        )
    return ds


def _datasets(datasets: Sequence[Any], what: str) -> tuple[Dataset[Any], ...]:
    if isinstance(datasets, Dataset) or not isinstance(datasets, Sequence) or not datasets:
        raise TypeError(f"{what} takes a non-empty sequence of datasets, got {datasets!r}.")
    return tuple(_dataset(d, what) for d in datasets)


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}.") from None
