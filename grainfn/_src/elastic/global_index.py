"""Grain's elastic iteration of a dataset: every host reads every H-th position from one index.

Host `h` of `H` reads positions `n + h, n + h + H, ...` of a dataset from the
global next index `n`, in batches of `global_batch_size // H`; each batch
moves `n` on by `global_batch_size` on every host alike. So the state,
`{"global_next_index": n}`, is the same on every host, and any host count
takes it up: global batch `b` holds positions `b * global_batch_size` to
`(b + 1) * global_batch_size - 1` for every host count, host `h` its `h`-th
of each `H` of them. Grain's `ElasticIterator` over a MapDataset does this;
for pipelines that filter or mix, logical shards (`grainfn._src.elastic.stream`)
keep the global batches for every host count that divides their number.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset, upstream_holes
from grainfn._src.core.instrument import Instrument
from grainfn._src.core.iterator import StreamIterator, open_iterator
from grainfn._src.core.reading import from_dataset
from grainfn._src.core.state import is_saved_count
from grainfn._src.core.stream import Stream
from grainfn._src.parallel.mp_prefetch import mp_prefetch
from grainfn._src.stages.batch import batch
from grainfn._src.stages.slice import slice

GLOBAL_NEXT_INDEX = "global_next_index"
"""The one field of the state: the global position the next global batch starts at."""


def host_batches(
    dataset: Dataset[Any],
    next_index: int,
    global_batch_size: int,
    shard_index: int,
    shard_count: int,
) -> Dataset[Any]:
    """Host `shard_index`'s batches of `dataset` from the global position `next_index` on.

    Examples:
        >>> from grainfn import fn
        >>> batches = host_batches(fn.range(16), 4, 4, shard_index=1, shard_count=2)
        >>> [b.tolist() for b in fn.elements(batches)]
        [[5, 7], [9, 11], [13, 15]]
    """
    start = next_index + shard_index
    strided = slice(builtins.slice(start, None, shard_count), dataset)
    return batch(global_batch_size // shard_count, strided, drop_remainder=True, sort_keys=True)


class GlobalIndexBatches(Iterator[Any]):
    """One host's batches of a dataset, from a global next index every host shares.

    Args:
        dataset: An unbatched dataset without holes (no filter: its batches
            would come out short).
        global_batch_size: Rows in a global batch, a multiple of `shard_count`.
        shard_index: This host's index in `[0, shard_count)`.
        shard_count: Hosts sharing each global batch.
        threads: Threads that read the dataset ahead (`from_dataset`'s).
        buffer: Positions they read ahead (`from_dataset`'s).
        thread_name: The name of the threads every read runs in (`from_dataset`'s).
        workers: Worker processes of an `mp_prefetch` over the reads; None: none.
        worker_options: `mp_prefetch`'s other keyword arguments.
        instruments: What the stream goes through as it opens (timing, a graph).

    Examples:
        >>> from grainfn import fn
        >>> it = GlobalIndexBatches(fn.range(16), 4, shard_index=1, shard_count=2)
        >>> [next(it).tolist(), next(it).tolist()], it.get_state()
        ([[1, 3], [5, 7]], {'global_next_index': 8})
        >>> one_host = GlobalIndexBatches(fn.range(16), 4, shard_index=0, shard_count=1)
        >>> one_host.set_state(it.get_state())
        >>> next(one_host).tolist()
        [8, 9, 10, 11]
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        global_batch_size: int,
        shard_index: int,
        shard_count: int,
        *,
        threads: int = 0,
        buffer: int = 500,
        thread_name: str | None = None,
        workers: int | None = None,
        worker_options: Mapping[str, Any] | None = None,
        instruments: Sequence[Instrument] = (),
    ) -> None:
        if (found := upstream_holes(dataset)) is not None:
            raise ValueError(
                "ElasticIterator does not support `filter` over a MapDataset "
                f"({found.describe_stage()} leaves holes), as in Grain. Pass "
                "ds.to_iter_dataset() with num_logical_shards= to filter elastically."
            )
        size = validate.check_positive_int(global_batch_size, "global_batch_size")
        if size % shard_count:
            raise ValueError(
                f"Global batch size {size} is not divisible by shard count "
                f"{shard_count}: each host reads an equal part of every batch."
            )
        self.dataset, self.global_batch_size = dataset, size
        self.shard_index, self.shard_count = shard_index, shard_count
        self.threads, self.buffer, self.thread_name = threads, buffer, thread_name
        self.workers, self.worker_options = workers, dict(worker_options or {})
        self.instruments = tuple(instruments)
        self.next_index = 0
        self.iterator: StreamIterator[Any] | None = None

    def stream(self) -> Stream[Any]:
        """The host's stream of batches from the global next index."""
        batches = host_batches(
            self.dataset,
            self.next_index,
            self.global_batch_size,
            self.shard_index,
            self.shard_count,
        )
        stream = from_dataset(
            batches, threads=self.threads, buffer=self.buffer, thread_name=self.thread_name
        )
        if self.workers is None:
            return stream
        return mp_prefetch(self.workers, stream, **self.worker_options)

    def __next__(self) -> Any:
        if self.iterator is None:
            self.iterator = open_iterator(self.stream(), None, self.instruments)
        batch = self.iterator.next_element()
        self.next_index += self.global_batch_size
        return batch

    def get_state(self) -> dict[str, Any]:
        """`{"global_next_index": n}`: the same on every host."""
        return {GLOBAL_NEXT_INDEX: self.next_index}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues at the state's global position (saved by any host count).

        Raises:
            ValueError: if `state` is not `{"global_next_index": n}` with n an integer >= 0.
        """
        if not isinstance(state, dict) or GLOBAL_NEXT_INDEX not in state:
            raise ValueError(
                f"An ElasticIterator over a MapDataset takes a state {{{GLOBAL_NEXT_INDEX!r}: n}}"
                f", got {validate.short_repr(state)}."
            )
        index = state[GLOBAL_NEXT_INDEX]
        if not is_saved_count(index):
            got = validate.short_repr(index)
            raise ValueError(f"{GLOBAL_NEXT_INDEX} must be an integer >= 0, got {got}.")
        self.close()
        self.next_index = index

    def set_state_from_files(self, saved: Sequence[tuple[Any, Any]]) -> None:
        """Continues from the `(path, state)` of each process that saved, any number of them.

        Raises:
            ValueError: if two processes saved different states: every host
                saves the same one, so they are not one checkpoint.
        """
        (first_path, first), *others = saved
        for path, data in others:
            if data != first:
                raise ValueError(
                    f"State files {first_path} and {path} differ ({first} and {data}): every "
                    "host of an elastic MapDataset iterator saves the same state, so they are "
                    "not one checkpoint."
                )
        self.set_state(first)

    def close(self) -> None:
        """Stops the current reader's threads and worker processes."""
        if self.iterator is not None:
            self.iterator.close()
            self.iterator = None

    def __repr__(self) -> str:
        return (
            f"global_next_index={self.next_index}, host {self.shard_index} of "
            f"{self.shard_count}, global_batch_size={self.global_batch_size}"
        )
