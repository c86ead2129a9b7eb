"""One host's batches of logical shards, read with their state and restored on any host count.

`LogicalShardBatches` reads the host stream of `elastic_batches`
(`grainfn._src.elastic.stream`) for a layout, with its worker processes,
and keeps its state in the saved form (`grainfn._src.elastic.states`). A
state saved by any host count that divides the number of logical shards
restores it; without a number of logical shards of its own, it takes the
saved one, and the host stream is laid out again for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from grainfn._src.core.filter_check import with_options_applied
from grainfn._src.core.instrument import Instrument, instrumented
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.stream import Stream
from grainfn._src.elastic import states
from grainfn._src.elastic.layout import Layout
from grainfn._src.elastic.stream import host_stream, with_workers


class LogicalShardBatches(Iterator[Any]):
    """This host's rows of each global batch, cut from logical shards of a stream pipeline.

    `get_state()` holds the states of this host's logical shards; a restart
    with another host count gathers them from every process's saved state
    (`set_state_from_files`).

    Args:
        stream: An unbatched pipeline whose data comes from datasets.
        global_batch_size: Rows in a global batch, a multiple of the number of logical shards.
        shard_index: This host's index in `[0, shard_count)`.
        shard_count: Hosts sharing each global batch; a divisor of the logical shards.
        num_logical_shards: How many streams the pipeline is cut into; None:
            `shard_count`, or the number a restored state was saved with.
        workers: Worker processes for all of this host's logical shards; None:
            the pipeline's own `mp_prefetch`, if any.
        worker_options: `mp_prefetch`'s other keyword arguments.
        instruments: What the host stream goes through (timing, a graph).

    Raises:
        ValueError: for a layout the counts do not allow (see `Layout`), or
            more logical shards than the data allows (see
            `grainfn._src.shards.logical.check_shard_count`).

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(16))
        >>> two = [LogicalShardBatches(stream, 4, h, 2, num_logical_shards=2) for h in (0, 1)]
        >>> [next(two[0]).tolist(), next(two[1]).tolist()]
        [[0, 2], [1, 3]]
        >>> one = LogicalShardBatches(stream, 4, 0, 1)
        >>> one.set_state_from_files([(f"host {h}", it.get_state()) for h, it in enumerate(two)])
        >>> next(one).tolist(), one.layout.num_logical_shards
        ([4, 6, 5, 7], 2)
    """

    def __init__(
        self,
        stream: Stream[Any],
        global_batch_size: int,
        shard_index: int,
        shard_count: int,
        *,
        num_logical_shards: int | None = None,
        workers: int | None = None,
        worker_options: Mapping[str, Any] | None = None,
        instruments: Sequence[Instrument] = (),
    ) -> None:
        self.stream = with_options_applied(stream)  # the filter check, as any Grain iterator
        self.global_batch_size = global_batch_size
        self.shard_index, self.shard_count = shard_index, shard_count
        self.requested = num_logical_shards
        self.workers, self.worker_options = workers, dict(worker_options or {})
        self.instruments = tuple(instruments)
        count = shard_count if num_logical_shards is None else num_logical_shards
        # The layout is checked now, so a bad one is refused at construction.
        try:
            self.host, self.codec = self._host_stream(count)
        except ValueError as error:
            if num_logical_shards is None:  # the error names an option the caller did not pass
                error.add_note(f"num_logical_shards was not given: it is shard_count, {count}.")
            raise
        self.iterator = StreamIterator(self.host)

    def _host_stream(self, num_logical_shards: int) -> tuple[Stream[Any], states.ElasticCodec]:
        """This host's stream for `num_logical_shards`, and the codec of its states."""
        layout = Layout(
            self.global_batch_size, num_logical_shards, self.shard_index, self.shard_count
        )
        host = host_stream(self.stream, layout)
        if self.workers is not None:
            host = with_workers(host, self.workers, **self.worker_options)
        # Timing and the pipeline graph go around the host stream: the same states.
        return instrumented(host, self.instruments), states.ElasticCodec(host)

    @property
    def layout(self) -> Layout:
        """The logical shards, global batch, and this host's part."""
        return self.codec.layout

    def __next__(self) -> Any:
        return self.iterator.next_element()

    def get_state(self) -> dict[str, Any]:
        """The states of this host's logical shards after the last batch returned."""
        return self.codec.encode(self.iterator.state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from an elastic state holding (at least) this host's logical shards.

        Without a number of logical shards of its own, the number saved in the state is taken.

        Raises:
            ValueError: if the state was saved with another global batch size
                or number of logical shards, or lacks one of this host's shards.
        """
        states.check_form(state, "The state")
        saved = state["num_logical_shards"]
        host, codec = self.host, self.codec
        if self.requested is None and saved != self.layout.num_logical_shards:
            host, codec = self._host_stream(saved)
        record = codec.decode(state)  # refused before anything changes
        self.iterator.close()
        self.host, self.codec = host, codec
        self.iterator = StreamIterator(host, record)

    def set_state_from_files(self, saved: Sequence[tuple[Any, Any]]) -> None:
        """Continues from the `(path, state)` of every process that saved, any process count."""
        self.set_state(states.merge(saved))

    def start_prefetch(self) -> None:
        """Starts the background reads now."""
        self.iterator.start_prefetch()

    def close(self) -> None:
        """Stops the threads and worker processes; `next` then raises ValueError."""
        self.iterator.close()

    def __repr__(self) -> str:
        layout = self.layout
        return (
            f"logical shards {list(layout.shards)} of {layout.num_logical_shards}, rows "
            f"{layout.rows.start}:{layout.rows.stop} of {layout.global_batch_size}"
        )
