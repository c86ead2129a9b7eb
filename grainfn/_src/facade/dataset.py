"""Grain's `dataset` module: MapDataset, IterDataset and DatasetIterator, thin wrappers.

A `MapDataset` holds a `grainfn.fn` dataset and an `IterDataset` a stream
(`.core`); each method builds a new core value with a `grainfn.fn`
combinator and wraps it. A `DatasetIterator` wraps a core `StreamIterator`.
`SourceMapDataset` and `RangeMapDataset` are the classes of Grain's internal
`source` module that code builds by name (`MapDataset.source` and
`MapDataset.range` in Grain).
`WithOptionsIterDataset` applies `DatasetOptions` to a pipeline, and
`get_next_index` / `set_next_index` move an iterator by the stages' own rules
(`grainfn._src.grain_states.next_index`).
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.dataset import INFINITE, Dataset
from grainfn._src.core.filter_check import WithOptionsStream
from grainfn._src.core.iterator import StreamIterator, open_iterator
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.core.stream import Stream
from grainfn._src.facade.base import DatasetOptions, InPlaceSlicing, NoStats, SharedMemoryOutput
from grainfn._src.facade.config import config
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.grain_states.next_index import at_next_index, next_index
from grainfn._src.parallel.cores import available_cores
from grainfn._src.stages.sources import ObjectDataset
from grainfn._src.transforms import FlatMap, apply_transformations, as_function

T = TypeVar("T")
_S = TypeVar("_S", bound="_Stages[Any]")
It = TypeVar("It", bound="CheckpointableIterator[Any]")


_NO_STATS = NoStats()
"""The one inert `_stats` every facade dataset and iterator shares."""


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

    @property
    def _stats(self) -> NoStats:
        """Grain's per-stage recorders, which subclasses call: inert here (see `NoStats`)."""
        return _NO_STATS

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
            self._core = ObjectDataset(
                self, _cores(self._parents, type(self).__qualname__, allow_empty=True)
            )
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

        `read_options` sets the threads that read this dataset, named as
        Grain's (`grain-prefetch_<n>`), and how far they read ahead when
        reading is slow (see `ReadOptions`); they never change the elements
        or the states.
        """
        options = ReadOptions() if read_options is None else read_options
        if not isinstance(options, ReadOptions):
            raise TypeError(f"read_options must be a grainfn.ReadOptions, got {options!r}.")
        stream = fn.from_dataset(
            self.core,
            allow_nones=allow_nones,
            threads=options.threads,
            buffer=options.buffer,
            thread_name=options.thread_name,
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


class SourceMapDataset(MapDataset[T]):
    """The items of a random-access source (`len` and `[]`): `MapDataset.source(source)`.

    The source is at `self._source`, as in Grain, for a subclass: one that
    defines its own `__getitem__` (and `__len__`) is read through them, as any
    MapDataset subclass is.

    Examples:
        >>> ds = SourceMapDataset(["a", "b", "c"]).seed(1).shuffle().repeat(2)
        >>> len(ds), sorted(ds) == ["a", "a", "b", "b", "c", "c"]
        (6, True)
        >>> class Doubled(SourceMapDataset):
        ...     def __len__(self):
        ...         return len(self._source)
        ...     def __getitem__(self, index):
        ...         return self._source[index % len(self)] * 2
        >>> list(Doubled([1, 2]).map(str))
        ['2', '4']
    """

    def __init__(self, source: Any) -> None:
        super().__init__()
        self._source = source
        if type(self).__getitem__ is MapDataset.__getitem__:  # not a subclass that reads itself
            self._core = fn.source(source)


class RangeMapDataset(MapDataset[int]):
    """The integers of Python's `range(start, stop, step)`: `MapDataset.range(...)`.

    Examples:
        >>> list(RangeMapDataset(2, 12, 3)), len(RangeMapDataset(4))
        ([2, 5, 8, 11], 4)
    """

    def __init__(self, start: int, stop: int | None = None, step: int = 1) -> None:
        super().__init__()
        self._core = fn.range(start, stop, step)


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
            sequence = validate.check_list(datasets, "IterDataset.mix")
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
        sequential_slice = validate.check_flag(sequential_slice, "mp_prefetch sequential_slice")
        grain_worker_order = validate.check_flag(grain_worker_order, "grain_worker_order")
        if grain_worker_order and options.num_workers > 0:
            parent = fn.grain_worker_order(options.num_workers, parent, sequential=sequential_slice)
        arguments = options.prefetch_arguments()
        stream = fn.mp_prefetch(
            options.num_workers, parent, worker_init_fn=worker_init_fn, **arguments
        )
        return _wrap_iter(stream)

    def ray_prefetch(
        self, pool: Any, *, adaptive: bool = True, worker_timeout: float | None = None
    ) -> IterDataset[T]:
        """Computes the map-level work on the Ray actors of `pool` (a `grainfn.fn.RayPool`).

        grainfn's addition beside `mp_prefetch`: the same work, on a Ray
        cluster's actors, with the same elements and states as reading here
        (a state saved with Ray restores without it, and the other way round).
        See `grainfn.fn.ray_prefetch`, for `adaptive` and `worker_timeout` too.
        """
        stream = fn.ray_prefetch(pool, self.core, adaptive=adaptive, worker_timeout=worker_timeout)
        return _wrap_iter(stream)

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


class WithOptionsIterDataset(IterDataset[T]):
    """`parent` with `options` applied to every stage of the pipeline, before and after it.

    Set several times, the options merge, and the setting nearest the end of
    the pipeline wins. Neither the elements nor the states change.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(3000).to_iter_dataset().filter(lambda x: x % 20 == 0)
        >>> ds = WithOptionsIterDataset(ds, DatasetOptions(filter_raise_threshold_ratio=0.9))
        >>> list(ds)
        Traceback (most recent call last):
        ...
        ValueError: filter(<lambda>) dropped 95.00% of the last 1000 elements it saw, ...
    """

    def __init__(self, parent: IterDataset[T], options: DatasetOptions) -> None:
        super().__init__(parent)
        if not isinstance(options, DatasetOptions):
            raise TypeError(f"WithOptionsIterDataset takes a DatasetOptions, got {options!r}.")
        self.options = options
        settings = tuple(sorted(options._set.items(), key=lambda item: item[0]))
        self._core = WithOptionsStream(iter_core(parent, "WithOptionsIterDataset"), settings)


class CheckpointableIterator(Iterator[T]):
    """What the Grain API's iterators share: Orbax v1 save and load, `close`, `with` blocks."""

    state_protocol_only = True  # its get_state and set_state are placeholders (stages/iterable.py)

    def get_state(self) -> Any:
        """The position after the last element returned (JSON-able)."""
        raise NotImplementedError

    def set_state(self, state: Any) -> None:
        """Continues from a state `get_state` returned."""
        raise NotImplementedError

    async def save(self, directory: Any) -> Awaitable[None]:
        """Orbax v1's checkpointable save: takes the state now, returns the background write."""
        from grainfn._src.checkpoint import background  # with asyncio: not for `import grainfn`

        return background.save(self, directory)

    async def load(self, directory: Any) -> Awaitable[None]:
        """Orbax v1's checkpointable load: returns the background read that sets the state."""
        from grainfn._src.checkpoint import background

        return background.load(self, directory)

    def close(self) -> None:
        """Releases threads and processes; `next` then raises ValueError."""
        raise NotImplementedError

    def __enter__(self: It) -> It:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class DatasetIterator(CheckpointableIterator[T]):
    """A checkpointable iterator over an IterDataset: Grain's `DatasetIterator`.

    `get_state()` returns a small JSON-able dict (positions and counters, never
    data) that names the pipeline; `set_state` refuses one of another pipeline.
    The core iterator is `.core`; its `.state` is the same position as a
    record of integers.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(5).to_iter_dataset())
        >>> next(it), next(it)
        (0, 1)
        >>> saved = it.get_state()
        >>> next(it)
        2
        >>> it.set_state(saved)
        >>> next(it)
        2
    """

    state_protocol_only = True  # its get_state and set_state read the pipeline's own iterator

    _core: StreamIterator[T]
    _codec: StateCodec
    _next: Callable[[], T]

    def __init__(self, parents: Any = ()) -> None:
        """Grain's constructor, for subclasses that implement the iterator themselves."""
        self._parents = tuple(parents) if isinstance(parents, Sequence) else (parents,)

    @property
    def _stats(self) -> NoStats:
        """Grain's per-stage recorders, which subclasses call: inert here (see `NoStats`)."""
        return _NO_STATS

    @property
    def _parent(self) -> Any:
        """The one parent iterator: what a Grain subclass reads after `super().__init__(parent)`."""
        if len(self._parents) != 1:
            raise AttributeError(
                f"{type(self).__qualname__} has {len(self._parents)} parent iterators, not 1."
            )
        return self._parents[0]

    @classmethod
    def over(cls, stream: Stream[T]) -> DatasetIterator[T]:
        """An iterator over a core stream, from its start.

        The stream goes through the instruments set now (see
        `grainfn._src.core.instrument`): with `grainfn.config` option
        `py_debug_mode` on, the iterator runs a timed copy of it (same elements
        and states, see `grainfn.describe`); with
        `py_dataset_visualization_output_dir` set, the pipeline is written there
        first (`save_pipeline`).
        """
        it: DatasetIterator[T] = object.__new__(DatasetIterator)
        it._parents = ()
        it._codec = StateCodec(stream)
        it._attach(open_iterator(stream, None, config.instruments))
        return it

    def _attach(self, core: StreamIterator[T]) -> None:
        self._core = core
        self._next = core.next_element

    @property
    def core(self) -> StreamIterator[T]:
        """The core iterator; `.core.state` is the state record."""
        return self._core

    def __next__(self) -> T:
        return self._next()

    def get_state(self) -> dict[str, Any]:
        """The position after the last element returned, as a JSON-able dict."""
        return self._codec.encode(self._core.state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from a state that `get_state` returned for this pipeline.

        A state written by Grain itself (`{"next_index": ...}` and the like,
        also read from an Orbax checkpoint Grain wrote) is taken where it
        determines grainfn's (see `grainfn._src.grain_states.streams`).

        Raises:
            ValueError: if the state belongs to another pipeline or version, or
                is truncated, or is Grain's for a stage whose position it does
                not determine; the message names what differs.
        """
        # Imported here: Grain's states name every stage, packing and file formats included.
        from grainfn._src.grain_states.decoding import decode_state

        self.restart_at(decode_state(self._codec, state))

    def grain_state(self) -> dict[str, Any]:
        """The position after the last element returned, written as Grain's own state.

        For going back to Grain mid-run: Grain's `set_state` of the same
        pipeline continues from it with the elements this iterator would
        yield next (`grainfn.checkpoint.CheckpointSave(it, grain_format=True)`
        writes it in an Orbax checkpoint Grain restores).

        Raises:
            ValueError: naming the stage whose Grain state grainfn cannot write
                (Grain's `mp_prefetch` splits its state between its workers:
                write the state of the pipeline without it, for Grain without it).

        Examples:
            >>> import grainfn as grain
            >>> it = iter(grain.MapDataset.range(9).to_iter_dataset().filter(lambda x: x % 3))
            >>> next(it), next(it), next(it)
            (1, 2, 4)
            >>> it.grain_state()  # positions 0 to 4 read
            {'next_index': 5}
        """
        from grainfn._src.grain_states.streams import to_grain  # knows every stage: imported here

        return to_grain(self._codec.stream, self._core.state)

    def restart_at(self, record: Any) -> None:
        """Continues from a state record of this pipeline (checked)."""
        self._core.close()
        self._attach(StreamIterator(self._core.stream, record))

    def start_prefetch(self) -> None:
        """Starts the background reads now, for example before restoring a model."""
        self._core.start_prefetch()

    def close(self) -> None:
        """Releases threads (and, with workers, processes); `next` then raises ValueError.

        A subclass that iterates by itself (Grain's protocol) has nothing to release here.
        """
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()
            self._next = core.next_element

    def __repr__(self) -> str:
        if not hasattr(self, "_codec"):  # a subclass that iterates by itself
            return object.__repr__(self)
        lines = "\n".join("  " + line for line in self._codec.pipeline)
        return f"DatasetIterator at {self._core.state} of:\n{lines}"


def get_next_index(ds_iter: DatasetIterator[Any]) -> int:
    """The index of the next element `ds_iter` returns.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset().batch(2))
        >>> _ = next(it)
        >>> get_next_index(it)
        1
    """
    core = _iterator_core(ds_iter)
    return next_index(core.stream, core.state)


def set_next_index(ds_iter: DatasetIterator[Any], index: int) -> None:
    """Moves `ds_iter` so that its next element is the one at `index`.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset())
        >>> set_next_index(it, 7)
        >>> next(it)
        7

    Raises:
        IndexError: for an index past the end of the dataset read.
        NotImplementedError: for a pipeline whose position is not one index.
    """
    index = validate.check_nonnegative_int(index, "index")
    core = _iterator_core(ds_iter)
    ds_iter.restart_at(at_next_index(core.stream, core.state, index))


def _iterator_core(ds_iter: Any) -> Any:
    if not isinstance(ds_iter, DatasetIterator):
        raise TypeError(f"Expected a grainfn DatasetIterator, got {type(ds_iter).__name__}.")
    return ds_iter.core


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


def _cores(datasets: Any, what: str, allow_empty: bool = False) -> tuple[Dataset[Any], ...]:
    checked = validate.check_list(datasets, what, allow_empty=allow_empty)
    return tuple(map_core(ds, what) for ds in checked)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
