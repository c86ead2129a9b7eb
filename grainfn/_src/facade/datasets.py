"""Grain's MapDataset and IterDataset, as thin wrappers over core values.

A `MapDataset` holds a `grainfn.fn` dataset and an `IterDataset` a stream (`.core`).
Each method builds a new core value with a `grainfn.fn` combinator and wraps it.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.stream import Stream
from grainfn._src.facade.in_place import InPlaceSlicing, SharedMemoryOutput
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions, available_cores
from grainfn._src.stages.sources import ObjectDataset
from grainfn._src.transforms import FlatMap, apply_transformations, as_function

T = TypeVar("T")
_S = TypeVar("_S", bound="_Stages[Any]")


class _Stages(SharedMemoryOutput, Generic[T]):
    """The stages MapDataset and IterDataset share: each builds a core value and wraps it."""

    def __init__(self, parents: Any = ()) -> None:
        """Grain's constructor, for subclasses that read by themselves (see the classes)."""
        self._parents = tuple(parents) if isinstance(parents, Sequence) else (parents,)
        self._core: Any = None

    @property
    def core(self) -> Any:
        """The `grainfn.fn` value this dataset wraps."""
        raise NotImplementedError

    def _rewrap(self: _S, value: Any) -> _S:
        raise NotImplementedError

    @property
    def parents(self) -> tuple[Any, ...]:
        """The datasets this one reads from."""
        raise NotImplementedError

    @property
    def _parent(self) -> Any:
        """The one parent: what a Grain subclass reads after `super().__init__(parent)`."""
        if len(parents := self.parents) != 1:
            raise AttributeError(f"{type(self).__qualname__} has {len(parents)} parents, not 1.")
        return parents[0]

    def seed(self: _S, seed: int) -> _S:
        """Seeds every random stage downstream that has no seed of its own."""
        return self._rewrap(fn.seed(seed, self.core))

    def map(self: _S, transform: Any) -> _S:
        """`transform(element)` (or `transform.map(element)`) for every element."""
        return self._rewrap(fn.map(as_function(transform, "map"), self.core))

    def random_map(self: _S, transform: Any, *, seed: int | None = None) -> _S:
        """`transform(element, rng)`, where the rng depends only on (seed, position).

        The position is the index in a MapDataset, the element's count in an
        IterDataset, as in Grain.
        """
        function = as_function(transform, "random_map")
        return self._rewrap(fn.random_map(function, self.core, seed=seed))

    def map_with_index(self: _S, transform: Any) -> _S:
        """`transform(position, element)` for every element."""
        return self._rewrap(fn.map_with_index(as_function(transform, "map_with_index"), self.core))

    def filter(self: _S, transform: Any) -> _S:
        """Keeps the elements where `transform(element)` is true.

        A MapDataset puts None where it drops one (iteration skips them); an
        IterDataset leaves them out.
        """
        return self._rewrap(fn.filter(as_function(transform, "filter"), self.core))

    def flat_map(self: _S, transform: Any, *, max_fan_out: int | None = None) -> _S:
        """Every part of `transform.flat_map(element)` (or `transform(element)`).

        A MapDataset keeps random access by giving each element `max_fan_out`
        positions (a `transforms.FlatMap` carries it), None past its last part.
        """
        if isinstance(transform, FlatMap):
            transform, max_fan_out = transform.flat_map, transform.max_fan_out
        return self._rewrap(fn.flat_map(transform, self.core, max_fan_out=max_fan_out))

    def batch(
        self: _S,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        batch_fn: Callable[[Sequence[Any]], Any] | None = None,
    ) -> _S:
        """Consecutive elements stacked leaf by leaf, dict keys sorted as in Grain (`fn.batch`)."""
        sort = batch_fn is None  # Grain's stacking sorts keys; a batch_fn's batches are its own
        batch = fn.batch(batch_size, drop_remainder=drop_remainder, batch_fn=batch_fn)
        return self._rewrap(batch(self.core, sort_keys=sort))

    def pipe(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """`func(self, *args, **kwargs)`: for chaining functions that take a dataset."""
        return func(self, *args, **kwargs)

    def apply(self: _S, transformations: Any) -> _S:
        """Applies one transformation object, or a sequence of them, in order."""
        return apply_transformations(self, transformations)


class MapDataset(InPlaceSlicing, _Stages[T]):
    """A dataset with random access: Grain's `MapDataset`.

    `len(ds)` is the length of one epoch and `ds[i]` the element at any index
    `i >= 0`; indices past the length address later epochs (a new shuffle, new
    random draws). Every method returns a new dataset. The pipeline is a
    `grainfn.fn` dataset, available as `.core`.

    A class written against Grain's protocol (subclass, call
    `super().__init__(parents)`, define `__len__` and `__getitem__`) works too.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(10).shuffle(seed=42).map(lambda x: x * 2)
        >>> len(ds), sorted(ds) == list(range(0, 20, 2))
        (10, True)
        >>> [b.tolist() for b in grain.MapDataset.range(5).batch(2)]
        [[0, 1], [2, 3], [4]]
    """

    _core: Dataset[T] | None

    # Factories.

    @staticmethod
    def source(source: Any) -> MapDataset[Any]:
        """The items of a Sequence or a random-access data source (`len` and `[]`)."""
        return _wrap_map(fn.source(source))

    @staticmethod
    def range(start: int, stop: int | None = None, step: int = 1) -> MapDataset[int]:
        """The integers of Python's `range(start, stop, step)`."""
        return _wrap_map(fn.range(start, stop, step))

    @staticmethod
    def mix(datasets: Sequence[MapDataset[Any]], weights: Any = None) -> MapDataset[Any]:
        """Interleaves datasets in proportion to `weights`; ends where the first runs out."""
        return _wrap_map(fn.mix(_cores(datasets, "MapDataset.mix"), weights))

    @staticmethod
    def concatenate(datasets: Sequence[MapDataset[Any]]) -> MapDataset[Any]:
        """The datasets one after another."""
        return _wrap_map(fn.concatenate(_cores(datasets, "MapDataset.concatenate")))

    @staticmethod
    def select_from_datasets(
        datasets: Sequence[MapDataset[Any]], selection_map: Any
    ) -> MapDataset[Any]:
        """Position `i` reads `datasets[d][k]` where `(d, k) = selection_map[i]`."""
        cores = _cores(datasets, "MapDataset.select_from_datasets")
        return _wrap_map(fn.select_from_datasets(cores, selection_map))

    # The core value.

    def _rewrap(self, value: Any) -> Any:
        return _wrap_map(value)

    @property
    def core(self) -> Dataset[T]:
        """The `grainfn.fn` dataset this one wraps."""
        if self._core is None:
            self._core = ObjectDataset(self, _cores(self._parents, type(self).__qualname__))
        return self._core

    @property
    def parents(self) -> tuple[Any, ...]:
        """The datasets this one reads from: a subclass's own parent objects, as in Grain."""
        if self._parents:
            return self._parents
        return tuple(_wrap(parent) for parent in self.core.parents)

    # Stages.

    def shuffle(self, seed: int | None = None) -> MapDataset[T]:
        """A new pseudorandom permutation in every epoch, the same as Grain's."""
        return _wrap_map(fn.shuffle(self.core, seed=seed))

    def slice(self, sl: builtins.slice) -> MapDataset[T]:
        """The positions a Python slice selects (also `ds[start:stop:step]`)."""
        if not isinstance(sl, builtins.slice):
            raise ValueError(f"MapDataset.slice takes a Python slice, got {sl!r}; ds[i] reads one.")
        return _wrap_map(fn.slice(sl, self.core))

    def repeat(self, num_epochs: int | None = None, *, reseed_each_epoch: bool = True) -> Any:
        """`num_epochs` epochs one after another, or forever (length `sys.maxsize`) for None."""
        return _wrap_map(fn.repeat(num_epochs, self.core, reseed_each_epoch=reseed_each_epoch))

    def to_iter_dataset(
        self, read_options: ReadOptions | None = None, *, allow_nones: bool = False
    ) -> IterDataset[T]:
        """The elements in order, as an IterDataset; Nones are skipped unless `allow_nones`.

        `read_options` sets the threads that read ahead when reading waits (see
        `ReadOptions`); they never change the elements or the states.
        """
        options = ReadOptions() if read_options is None else read_options
        if not isinstance(options, ReadOptions):
            raise TypeError(f"read_options must be a grainfn.ReadOptions, got {options!r}.")
        stream = fn.from_dataset(
            self.core, allow_nones=allow_nones, threads=options.threads, buffer=options.buffer
        )
        return _wrap_iter(stream)

    # Reading.

    def __len__(self) -> int:
        return self.core.length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, builtins.slice):
            return self.slice(index)
        core = self.core
        index = validate.check_integer(index, "index")
        if index < 0 and core.length < INFINITE:
            if index < -core.length:
                raise IndexError(
                    f"index {index} is out of range for a dataset of length {core.length}."
                )
            index += core.length
        return core.get(index)

    def __iter__(self) -> Iterator[T]:
        return iter(self.to_iter_dataset())

    def __repr__(self) -> str:
        if self._core is None and type(self) is not MapDataset:
            return object.__repr__(self)
        return f"MapDataset:\n{_indent(repr(self.core))}"


class IterDataset(_Stages[T]):
    """A dataset read in order, with checkpointable iterators: Grain's `IterDataset`.

    Make one with `MapDataset.to_iter_dataset()` or `IterDataset.mix(...)`.
    Every method returns a new dataset. The pipeline is a `grainfn.fn` stream,
    available as `.core`.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(6).to_iter_dataset().filter(lambda x: x % 2).batch(2)
        >>> [b.tolist() for b in ds]
        [[1, 3], [5]]
    """

    _core: Stream[T] | None

    @staticmethod
    def mix(
        datasets: Sequence[Any] | Mapping[str, Any],
        weights: Sequence[float] | Mapping[str, float] | None = None,
    ) -> IterDataset[Any]:
        """Interleaves datasets in proportion to `weights`; stops when the one due runs out.

        Components may be a list, or a dict of named components, with weights
        as a list (in the dict's order) or a dict of the same names. A
        MapDataset component is read with `to_iter_dataset()`.
        """
        if isinstance(datasets, Mapping):
            streams: Any = {
                name: stream_core(ds, "IterDataset.mix") for name, ds in datasets.items()
            }
        else:
            sequence = _sequence(datasets, "IterDataset.mix")
            streams = [stream_core(ds, "IterDataset.mix") for ds in sequence]
        return _wrap_iter(fn.mix(streams, weights))

    def _rewrap(self, value: Any) -> Any:
        return _wrap_iter(value)

    @property
    def core(self) -> Stream[T]:
        """The `grainfn.fn` stream this dataset wraps (`fn.from_iterable` for a subclass)."""
        if self._core is None:  # a subclass with its own __iter__: its state counts elements
            return fn.from_iterable(self)
        return self._core

    @property
    def parents(self) -> tuple[Any, ...]:
        """The datasets this one reads from, as facade objects."""
        if self._core is None:
            return self._parents
        return tuple(_wrap(parent) for parent in self._core.parents)

    def mp_prefetch(
        self,
        options: MultiprocessingOptions | None = None,
        worker_init_fn: Callable[[int, int], None] | None = None,
        sequential_slice: bool = False,
        *,
        grain_worker_order: bool = False,
    ) -> IterDataset[T]:
        """Computes the map-level work in worker processes, ahead of the consumer.

        Elements and states never depend on `options.num_workers` (a state saved
        with N workers restores with M), so Grain's `sequential_slice` (how its
        workers split the data) changes nothing. Default: a worker per core, at most 10.

        `grain_worker_order=True` (grainfn's option, for runs moving from or
        to Grain mid-epoch) yields Grain's order instead: each of the N
        workers runs the pipeline over its own slice of the data
        (`sequential_slice` as in Grain) and their elements come in turn, as
        Grain's `mp_prefetch` yields them; the state is Grain's too (an
        interleave of the workers'), so Grain's state is read and
        `grain_state()` writes one Grain reads. The output then depends on N.
        """
        if options is None:
            options = MultiprocessingOptions(num_workers=min(10, available_cores()))
        if not isinstance(options, MultiprocessingOptions):
            raise TypeError(f"mp_prefetch takes a grainfn.MultiprocessingOptions, got {options!r}.")
        parent = self.core
        if grain_worker_order and options.num_workers > 0:
            parent = fn.grain_worker_order(options.num_workers, parent, sequential=sequential_slice)
        arguments = options.prefetch_arguments()
        stream = fn.mp_prefetch(
            options.num_workers, parent, worker_init_fn=worker_init_fn, **arguments
        )
        return _wrap_iter(stream)

    def ray_prefetch(self, pool: Any) -> IterDataset[T]:
        """Computes the map-level work on the Ray actors of `pool` (a `grainfn.fn.RayPool`).

        grainfn's addition beside `mp_prefetch`: the same work, on a Ray
        cluster's actors, with the same elements and states as reading here
        (a state saved with Ray restores without it, and the other way round).
        See `grainfn.fn.ray_prefetch`.
        """
        return _wrap_iter(fn.ray_prefetch(pool, self.core))

    def prefetch(self, multiprocessing_options: MultiprocessingOptions) -> IterDataset[T]:
        """Deprecated alias of `mp_prefetch`."""
        warnings.warn("IterDataset.prefetch is deprecated; use mp_prefetch.", DeprecationWarning, 2)
        return self.mp_prefetch(multiprocessing_options)

    def __iter__(self) -> DatasetIterator[T]:
        return DatasetIterator.over(self.core)

    def __repr__(self) -> str:
        if self._core is None:
            return object.__repr__(self)
        return f"IterDataset:\n{_indent(repr(self._core))}"


def _wrap_map(dataset: Dataset[Any]) -> MapDataset[Any]:
    ds: MapDataset[Any] = object.__new__(MapDataset)
    ds._parents = ()
    ds._core = dataset
    return ds


def _wrap_iter(stream: Stream[Any]) -> IterDataset[Any]:
    ds: IterDataset[Any] = object.__new__(IterDataset)
    ds._parents = ()
    ds._core = stream
    return ds


def _wrap(value: Any) -> Any:
    if isinstance(value, ObjectDataset):
        return value.obj
    return _wrap_iter(value) if isinstance(value, Stream) else _wrap_map(value)


def map_core(ds: Any, what: str) -> Dataset[Any]:
    """The core dataset of a MapDataset; a TypeError naming `what` for anything else."""
    if not isinstance(ds, MapDataset):
        raise TypeError(f"{what} takes MapDatasets, got {validate.short_repr(ds)}.")
    return ds.core


def iter_core(ds: Any, what: str) -> Stream[Any]:
    """The core stream of an IterDataset; a TypeError naming `what` for anything else."""
    if not isinstance(ds, IterDataset):
        hint = (
            " Read a MapDataset with .to_iter_dataset() first."
            if isinstance(ds, MapDataset)
            else ""
        )
        raise TypeError(
            f"{what} takes an IterDataset, got {ds!r} of type {type(ds).__name__}.{hint}"
        )
    return ds.core


def stream_core(ds: Any, what: str) -> Stream[Any]:
    """The core stream of an IterDataset, or of a MapDataset read with `to_iter_dataset()`."""
    if isinstance(ds, MapDataset):
        return ds.to_iter_dataset().core
    if isinstance(ds, IterDataset):
        return ds.core
    raise TypeError(
        f"{what} takes IterDatasets or MapDatasets, got {ds!r} of type {type(ds).__name__}."
    )


def _cores(datasets: Any, what: str) -> tuple[Dataset[Any], ...]:
    return tuple(map_core(ds, what) for ds in _sequence(datasets, what))


def _sequence(datasets: Any, what: str) -> Sequence[Any]:
    if isinstance(datasets, Sequence) and not isinstance(datasets, (str, bytes)):
        return datasets
    raise TypeError(f"{what} takes a list of datasets, got {validate.short_repr(datasets)}.")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
