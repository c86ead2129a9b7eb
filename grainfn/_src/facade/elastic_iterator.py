"""Grain's `ElasticIterator`: global batches that survive a change in the number of hosts.

Two modes, chosen by what is passed:

- a MapDataset, without `num_logical_shards`: Grain's own behaviour and state
  (`{"global_next_index": n}`): host `h` of `H` reads every `H`-th position from
  the global position reached, batched by `global_batch_size // H`
  (`grainfn._src.elastic.global_index`);
- an IterDataset, or `num_logical_shards=`: grainfn's logical shards
  (`grainfn._src.elastic.logical_batches`), for any pipeline (filter, mix, packing,
  `mp_prefetch`); the rows of host `h` are its contiguous slice of each global
  batch, and the global batches are the same for every host count that
  divides `num_logical_shards`.

Either iterator restores, through `grainfn.checkpoint.CheckpointRestore`, from
a checkpoint written by any number of processes. Both are the core's; the
classes here turn Grain's options into the core's arguments and wrap them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grainfn._src.core.stream import Stream
from grainfn._src.elastic.global_index import GlobalIndexBatches
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.logical_batches import LogicalShardBatches
from grainfn._src.facade.config import config
from grainfn._src.facade.dataset import (
    CheckpointableIterator,
    IterDataset,
    MapDataset,
    iter_core,
    map_core,
)
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.loader.sharding import ShardOptions


class ElasticIterator(IterDataset[Any]):
    """Batches of `global_batch_size` rows split over hosts, resumable on another host count.

    Args:
        ds: An unbatched MapDataset (Grain's mode) or IterDataset (logical shards).
        global_batch_size: Rows in one global batch, over all hosts.
        shard_options: This host's `shard_index` of `shard_count` hosts.
        read_options: How a MapDataset `ds` is read (threads); never changes the
            data. An IterDataset keeps the ReadOptions of its `to_iter_dataset`.
        multiprocessing_options: Worker processes for this host (one pool for
            all its logical shards); never changes the data.
        num_logical_shards: How many independent streams the pipeline is cut
            into (logical-shard mode). The host count must divide it, and
            `global_batch_size` must be a multiple of it. Up to 1024 whatever
            the data; more only up to the length of the longest dataset the
            pipeline reads (a shard past it would read nothing, and each
            costs a stream and a state). None: taken from the restored
            state, else `shard_options.shard_count`.

    Raises:
        ValueError: in logical-shard mode, for counts the layout does not
            allow, or more logical shards than 1024 and than the data has
            positions; both are refused before any shard is built. Grain's
            mode builds nothing per host and takes any `shard_count`, as
            Grain does.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(12).to_iter_dataset().filter(lambda x: x % 3)
        >>> it = ElasticIterator(ds, 4, grain.ShardOptions(0, 1), num_logical_shards=2)
        >>> [b.tolist() for b in it]
        [[2, 4, 1, 5], [8, 10, 7, 11]]
    """

    def __init__(
        self,
        ds: MapDataset[Any] | IterDataset[Any],
        global_batch_size: int,
        shard_options: ShardOptions,
        *,
        read_options: ReadOptions | None = None,
        multiprocessing_options: MultiprocessingOptions | None = None,
        num_logical_shards: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(shard_options, ShardOptions):
            raise TypeError(f"shard_options must be a grainfn.ShardOptions, got {shard_options!r}.")
        if isinstance(ds, MapDataset) and num_logical_shards is None:
            self._default: Any = _GrainElasticIterator(
                ds, global_batch_size, shard_options, read_options, multiprocessing_options
            )
            return
        if isinstance(ds, MapDataset):
            ds = ds.to_iter_dataset(read_options)
        elif not isinstance(ds, IterDataset):
            raise TypeError(
                f"ElasticIterator takes a MapDataset or an IterDataset, got {type(ds).__name__}."
            )
        self._default = ElasticDatasetIterator(
            iter_core(ds, "ElasticIterator"),
            global_batch_size,
            shard_options,
            multiprocessing_options,
            num_logical_shards,
        )

    def __iter__(self) -> Any:
        return self._default

    def __next__(self) -> Any:
        return next(self._default)

    def get_state(self) -> dict[str, Any]:
        """The position after the last batch returned (see the iterator's `get_state`)."""
        return self._default.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from a state this host or any other host count saved."""
        self._default.set_state(state)

    def set_state_from_files(self, saved: Sequence[Any]) -> None:
        """Continues from the state files of every process that saved (Orbax restores so)."""
        self._default.set_state_from_files(saved)

    def close(self) -> None:
        """Stops the threads and worker processes of the iterator."""
        self._default.close()

    def __repr__(self) -> str:
        return f"ElasticIterator({self._default!r})"


class ElasticDatasetIterator(CheckpointableIterator[Any]):
    """This host's rows of each global batch, cut from logical shards: the core's, wrapped.

    `get_state()` holds the states of this host's logical shards; a restart
    with another host count gathers them from every process's file
    (`set_state_from_files`, which `CheckpointRestore` calls). See
    `grainfn._src.elastic.logical_batches.LogicalShardBatches`.
    """

    def __init__(
        self,
        stream: Stream[Any],
        global_batch_size: int,
        shard_options: ShardOptions,
        multiprocessing_options: MultiprocessingOptions | None,
        num_logical_shards: int | None,
    ) -> None:
        workers = multiprocessing_options
        self._core = LogicalShardBatches(
            stream,
            global_batch_size,
            shard_options.shard_index,
            shard_options.shard_count,
            num_logical_shards=num_logical_shards,
            workers=None if workers is None else workers.num_workers,
            worker_options=None if workers is None else workers.prefetch_arguments(),
            instruments=config.instruments,
        )

    @property
    def layout(self) -> Layout:
        """The logical shards, global batch, and this host's part."""
        return self._core.layout

    def __next__(self) -> Any:
        return next(self._core)

    def get_state(self) -> dict[str, Any]:
        """The states of this host's logical shards after the last batch returned."""
        return self._core.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from an elastic state holding (at least) this host's logical shards.

        With `num_logical_shards=None`, the number saved in the state is taken.

        Raises:
            ValueError: if the state was saved with another global batch size
                or number of logical shards, or lacks one of this host's shards.
        """
        self._core.set_state(state)

    def set_state_from_files(self, saved: Sequence[Any]) -> None:
        """Continues from the `StateFile`s of every process that saved, any process count."""
        self._core.set_state_from_files([(f.path, f.data) for f in saved])

    def start_prefetch(self) -> None:
        """Starts the background reads now."""
        self._core.start_prefetch()

    def close(self) -> None:
        """Stops the threads and worker processes; `next` then raises ValueError."""
        self._core.close()

    def __repr__(self) -> str:
        return f"ElasticDatasetIterator({self._core!r})"


class _GrainElasticIterator(CheckpointableIterator[Any]):
    """Grain's elastic MapDataset iterator: the core's `GlobalIndexBatches`, wrapped."""

    def __init__(
        self,
        ds: MapDataset[Any],
        global_batch_size: int,
        shard_options: ShardOptions,
        read_options: ReadOptions | None,
        workers: MultiprocessingOptions | None,
    ) -> None:
        reading = ReadOptions() if read_options is None else read_options
        if not isinstance(reading, ReadOptions):
            raise TypeError(f"read_options must be a grainfn.ReadOptions, got {reading!r}.")
        if workers is not None and not isinstance(workers, MultiprocessingOptions):
            raise TypeError(
                "multiprocessing_options must be a grainfn.MultiprocessingOptions, got "
                f"{workers!r}."
            )
        self._core = GlobalIndexBatches(
            map_core(ds, "ElasticIterator"),
            global_batch_size,
            shard_options.shard_index,
            shard_options.shard_count,
            threads=reading.threads,
            buffer=reading.buffer,
            thread_name=reading.thread_name,
            workers=None if workers is None else workers.num_workers,
            worker_options=None if workers is None else workers.prefetch_arguments(),
            instruments=config.instruments,
        )

    def __next__(self) -> Any:
        return next(self._core)

    def get_state(self) -> dict[str, Any]:
        """`{"global_next_index": n}`: the same on every host, as in Grain."""
        return self._core.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues at the state's global position (any host count)."""
        self._core.set_state(state)

    def set_state_from_files(self, saved: Sequence[Any]) -> None:
        """Continues from the process files of a save by any number of hosts (all alike)."""
        self._core.set_state_from_files([(f.path, f.data) for f in saved])

    def close(self) -> None:
        """Stops the current reader's threads and worker processes."""
        self._core.close()

    def __repr__(self) -> str:
        return repr(self._core)
