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
a checkpoint written by any number of processes. Both are the core's
(`GlobalIndexBatches`, `LogicalShardBatches`); `ElasticIterator` turns
Grain's options into the core's arguments and forwards to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


class ElasticIterator(IterDataset[Any], CheckpointableIterator[Any]):
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
        workers = _checked_workers(multiprocessing_options)
        worker_count = None if workers is None else workers.num_workers
        worker_options = None if workers is None else workers.prefetch_arguments()
        self._batches: GlobalIndexBatches | LogicalShardBatches
        if isinstance(ds, MapDataset) and num_logical_shards is None:
            reading = _checked_reading(read_options)
            self._batches = GlobalIndexBatches(
                map_core(ds, "ElasticIterator"),
                global_batch_size,
                shard_options.shard_index,
                shard_options.shard_count,
                threads=reading.threads,
                buffer=reading.buffer,
                thread_name=reading.thread_name,
                workers=worker_count,
                worker_options=worker_options,
                instruments=config.instruments,
            )
            return
        if isinstance(ds, MapDataset):
            ds = ds.to_iter_dataset(read_options)
        elif not isinstance(ds, IterDataset):
            raise TypeError(
                f"ElasticIterator takes a MapDataset or an IterDataset, got {type(ds).__name__}."
            )
        self._batches = LogicalShardBatches(
            iter_core(ds, "ElasticIterator"),
            global_batch_size,
            shard_options.shard_index,
            shard_options.shard_count,
            num_logical_shards=num_logical_shards,
            workers=worker_count,
            worker_options=worker_options,
            instruments=config.instruments,
        )

    @property
    def layout(self) -> Layout:
        """The logical shards, global batch, and this host's part (logical-shard mode)."""
        return self._logical_shards("layout").layout

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def get_state(self) -> dict[str, Any]:
        """The position after the last batch returned.

        `{"global_next_index": n}` in Grain's mode, the same on every host; in
        logical-shard mode, the states of this host's logical shards.
        """
        return self._batches.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from a state this host or any other host count saved.

        In logical-shard mode with `num_logical_shards=None`, the number saved
        in the state is taken.

        Raises:
            ValueError: if the state is not of this mode, or (logical shards) was
                saved with another global batch size or number of logical
                shards, or lacks one of this host's shards.
        """
        self._batches.set_state(state)

    def set_state_from_files(self, saved: Sequence[Any]) -> None:
        """Continues from the `StateFile`s of every process that saved (Orbax restores so)."""
        self._batches.set_state_from_files([(f.path, f.data) for f in saved])

    def start_prefetch(self) -> None:
        """Starts the background reads now (logical-shard mode)."""
        self._logical_shards("start_prefetch").start_prefetch()

    def close(self) -> None:
        """Stops the threads and worker processes of the iterator."""
        self._batches.close()

    def _logical_shards(self, name: str) -> LogicalShardBatches:
        if not isinstance(self._batches, LogicalShardBatches):
            raise AttributeError(
                f"ElasticIterator.{name} is for logical shards (an IterDataset, or "
                "num_logical_shards=); Grain's mode over a MapDataset has none."
            )
        return self._batches

    def __repr__(self) -> str:
        return f"ElasticIterator({self._batches!r})"


def _checked_reading(read_options: ReadOptions | None) -> ReadOptions:
    reading = ReadOptions() if read_options is None else read_options
    if not isinstance(reading, ReadOptions):
        raise TypeError(f"read_options must be a grainfn.ReadOptions, got {reading!r}.")
    return reading


def _checked_workers(workers: MultiprocessingOptions | None) -> MultiprocessingOptions | None:
    if workers is not None and not isinstance(workers, MultiprocessingOptions):
        raise TypeError(
            f"multiprocessing_options must be a grainfn.MultiprocessingOptions, got {workers!r}."
        )
    return workers
