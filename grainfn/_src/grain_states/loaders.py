"""DataLoader states written by Grain, read into grainfn's loader where the mapping is exact.

Grain's DataLoader state names the last sampler index each worker returned
(`last_seen_indices`) and the worker that returned the last element. Shard
`s` of `n` reads sampler indices `s, s + n, ...`, so the last index says how
many records of the shard were taken: `p = (last + n - s) / n`. grainfn's
loader is a pipeline over those records, and its state at record `p` follows
from the stages: maps and filters keep the record position, a map-level
batch divides it, and a stream batch or filter has its parent's state
between elements.

Without workers, or with one, Grain returns the records in sampler order,
as grainfn does, for every operation. With more workers Grain's order
depends on their number (each worker batches and filters its own records),
so only one-to-one operations (map, random map, map with index) map
exactly; the rest are refused. (With a `FlatMap`, Grain's DataLoader runs as
a dataset pipeline and writes that pipeline's state instead, which
`grainfn._src.grain_states.streams` reads.)

The state names its sampler and source by their reprs. Grain's
`ArrayRecordDataSource` writes `ArrayRecordDataSource(hash_of_paths=<sha1>)`,
the SHA-1 of its file paths, as given, one after another (`names_source`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.loader_records import LoaderRecords
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream
from grainfn._src.formats.array_record.source import ArrayRecordDataSource
from grainfn._src.loader.sharding import ShardOptions
from grainfn._src.shards.worker_order import GrainWorkerOrderStream
from grainfn._src.stages.interleave import InterleaveSlot, InterleaveState


def records_taken(state: dict[str, Any], shard: ShardOptions) -> int:
    """How many records of `shard` Grain's DataLoader `state` says were taken.

    Shard `s` of `n` reads sampler indices `s + q * n` for its local records
    `q = 0, 1, ...`. Without workers, `last_seen_indices["0"]` is the last
    index returned (`s - n` before the first). With `w` workers, worker `k`
    reads the local records `k, k + w, ...` and they are returned in turn, so
    each worker's entry is the last index it returned (`s + (k - w) * n`
    before its first), and the records taken are one more than the largest
    local record among them. (`last_worker_index` is the worker that
    returned the last one, or -1 once a round of all workers is complete: it
    does not say alone how many were taken.)

    Examples:
        >>> state = {"worker_count": 0, "last_seen_indices": {"0": 5}, "last_worker_index": -1}
        >>> records_taken(state, ShardOptions(1, 2))  # indices 1, 3, 5 of shard 1 of 2
        3
        >>> state = {"worker_count": 2, "last_seen_indices": {"0": 0, "1": 1}}
        >>> records_taken(state, ShardOptions(0, 1))  # a complete round of 2 workers
        2
    """
    workers = _integer(state, "worker_count")
    last_seen = _last_seen(state, workers)
    return 1 + max(_local_record(last, shard, key, workers) for key, last in last_seen.items())


def _last_seen(state: dict[str, Any], workers: int) -> dict[str, Any]:
    """Grain's `last_seen_indices`, checked to name each of the `workers` (one for 0).

    Checked against the entries the state holds, never by listing `workers`
    numbers: a state's claim costs no more than the state itself.
    """
    last_seen = state.get("last_seen_indices")
    count = max(1, workers)
    if (
        not isinstance(last_seen, dict)
        or len(last_seen) != count
        or set(last_seen) != {str(k) for k in range(len(last_seen))}
    ):
        numbers = "'0'" if count == 1 else f"'0' to '{count - 1}'"
        raise ValueError(
            f"Grain's DataLoader state should map the worker numbers {numbers} to sampler "
            f"indices in 'last_seen_indices', got {records.describe_value(last_seen)}: it is "
            f"not the state of a DataLoader with {workers} workers."
        )
    return last_seen


def _local_record(last: Any, shard: ShardOptions, key: str, workers: int) -> int:
    """The local record of `shard` that worker `key` last returned (negative: none yet).

    Worker `k` of `w` reads the local records `k, k + w, ...` (without
    workers, all of them), so it names one of those, or `k - w`, the one
    before its first; anything else is another loader's state.
    """
    if isinstance(last, bool) or not isinstance(last, int):
        raise ValueError(
            f"Grain's DataLoader state should hold an integer index for worker {key} in "
            f"'last_seen_indices', got {records.describe_value(last)}."
        )
    local, off = divmod(last - shard.shard_index, shard.shard_count)
    if off:
        raise ValueError(
            f"Grain's DataLoader state names sampler index {last}, which shard "
            f"{shard.shard_index} of {shard.shard_count} does not read: the state belongs to "
            "another shard or loader."
        )
    step, worker = max(1, workers), int(key)
    before_first = worker - step
    if local < before_first or (local - worker) % step:
        before = shard.shard_index + before_first * shard.shard_count
        raise ValueError(
            f"Grain's DataLoader state names sampler index {last} for worker {key} of "
            f"{workers}, which that worker never returns: it returns every {step}th local "
            f"record of the shard from record {worker}, and before its first the index is "
            f"{before}. The state was changed, or belongs to another loader."
        )
    return local


def loader_from_grain(stream: Stream[Any], state: dict[str, Any], shard: ShardOptions) -> Any:
    """The record of a DataLoader's `stream` at the position Grain's DataLoader `state` names.

    Raises:
        ValueError: for a state that does not fit the shard, or where Grain's
            order differs from grainfn's (more than one worker and an
            operation other than a map), naming the stage.
    """
    ordered = _in_worker_order(stream)
    if ordered is not None:
        return _ordered_from_grain(ordered, state, shard)
    one_to_one = _integer(state, "worker_count") > 1
    return _at_record(stream, records_taken(state, shard), one_to_one)


def _in_worker_order(stream: Any) -> GrainWorkerOrderStream | None:
    """The loader's `GrainWorkerOrderStream` (under its transparent stages), if it has one."""
    while not isinstance(stream, GrainWorkerOrderStream):
        if not stream.transparent:
            return None
        (stream,) = stream.parents
    return stream


def _ordered_from_grain(
    stream: GrainWorkerOrderStream, state: dict[str, Any], shard: ShardOptions
) -> InterleaveState:
    """The interleave record of a loader in Grain's worker order, from Grain's state.

    Worker `k` of `n` took the local records `k, k + n, ...`: its last index
    says how many of its own, and the next worker is the one after
    `last_worker_index` (the first after a complete round, -1).
    """
    workers = stream.count
    written = _integer(state, "worker_count")
    if written != workers:
        raise ValueError(
            f"Grain's DataLoader state is of {written} workers, but this loader yields Grain's "
            f"order of {workers}: make it with worker_count={written} to read this state."
        )
    last_seen = _last_seen(state, workers)
    slots = []
    for k in range(workers):
        own = (_local_record(last_seen[str(k)], shard, str(k), workers) - k) // workers
        record = _at_record(stream.components[k], own + 1, one_to_one=False)
        slots.append(InterleaveSlot(k, False, record))
    last_worker = _integer(state, "last_worker_index", least=-1)
    return InterleaveState((last_worker + 1) % workers, workers, tuple(slots))


def loader_to_grain(
    stream: Stream[Any], record: Any, shard: ShardOptions, workers: int
) -> dict[str, Any]:
    """Grain's DataLoader state, for `workers` Grain workers, at the record of `stream`.

    The inverse of `loader_from_grain` (`records_taken` gives the layout),
    without the fields naming the sampler and the source (the caller's).

    Raises:
        ValueError: where Grain's order with that many workers is not
            grainfn's (an operation other than a map), naming the stage.
    """
    start, count = shard.shard_index, shard.shard_count
    ordered = _in_worker_order(stream)
    if ordered is not None:
        return _ordered_to_grain(ordered, record, start, count, workers)
    taken = _records_at(stream, record, one_to_one=workers > 1)
    if workers == 0:
        last_seen, last_worker = {"0": start + (taken - 1) * count}, -1
    else:
        # Worker k returned local records k, k + workers, ...: its last one before `taken`.
        last_seen = {
            str(k): start + (k + workers * ((taken - 1 - k) // workers)) * count
            for k in range(workers)
        }
        last_worker = (taken - 1) % workers
        last_worker = -1 if last_worker == workers - 1 else last_worker  # a round completed
    return {
        "version": 2,
        "last_seen_indices": last_seen,
        "last_worker_index": last_worker,
        "worker_count": workers,
    }


def _ordered_to_grain(
    stream: GrainWorkerOrderStream, record: InterleaveState, start: int, count: int, workers: int
) -> dict[str, Any]:
    """Grain's DataLoader state at the interleave record of a loader in Grain's worker order."""
    if workers != stream.count:
        raise ValueError(
            f"This loader yields the order of Grain's DataLoader with {stream.count} workers; "
            f"its state cannot be written for {workers}: pass worker_count={stream.count}."
        )
    last_seen = {}
    for slot in record.components:
        own = _records_at(stream.components[slot.dataset], slot.parent, one_to_one=False)
        last_seen[str(slot.dataset)] = start + (slot.dataset + workers * (own - 1)) * count
    return {
        "version": 2,
        "last_seen_indices": dict(sorted(last_seen.items(), key=lambda item: int(item[0]))),
        "last_worker_index": record.slot - 1 if record.slot else -1,
        "worker_count": workers,
    }


def grain_source_name(source: Any, name: str) -> str:
    """How Grain's DataLoader state names `source`: an ArrayRecord source by a digest.

    Grain names its ArrayRecord source by the digest of its paths
    (`hash_of_paths`); any other as grainfn does (`name`).
    """
    if isinstance(source, ArrayRecordDataSource):
        return f"ArrayRecordDataSource(hash_of_paths={hash_of_paths(source.paths)})"
    return name


def _records_at(stream: Any, record: Any, one_to_one: bool) -> int:
    """The records of the shard taken at `record` of a loader's `stream` (inverse `_at_record`)."""
    position = record.position  # the record of the `from_dataset` leaf, as every stage above
    for stage, declared in _loader_stages(stream, one_to_one, written=True):
        position = declared.parent_position(stage, position)
    return position


def _at_record(stream: Any, taken: int, one_to_one: bool) -> Any:
    """The record of a loader's `stream` once the shard's first `taken` records are read."""
    return records.DatasetPosition(_position(_loader_stages(stream, one_to_one), taken))


def _position(stages: list[tuple[Dataset[Any], LoaderRecords]], taken: int) -> int:
    """The position in the top of `stages` (top first) after the first `taken` records."""
    position = taken
    for stage, declared in reversed(stages):
        position = declared.position_after(stage, position)
    return position


def _loader_stages(
    stage: Any, one_to_one: bool, written: bool = False
) -> list[tuple[Dataset[Any], LoaderRecords]]:
    """The dataset stages of a loader from `stage` down to its records, top first, as declared.

    The one walk of the translations here: through the stream stages (each
    one's state is the record of its `from_dataset` leaf), then the dataset
    stages, each as its `loader_records` declares. Where `one_to_one` (more
    than one Grain worker), only the stages that keep Grain's order with any
    worker count pass.

    Raises:
        ValueError: naming the first stage that does not pass.
    """
    stages = []
    while not _ends_walk(stage):
        if isinstance(stage, FromDatasetStream):
            stage = stage.dataset
            continue
        if not _passes(stage, one_to_one):
            raise _refused(stage, one_to_one, written)
        if isinstance(stage, Dataset) and stage.loader_records is not None:
            stages.append((stage, stage.loader_records))
        (stage,) = stage.parents
    return stages


def _passes(stage: Any, one_to_one: bool) -> bool:
    """Whether a loader's walk goes through `stage` to its parent."""
    if isinstance(stage, Stream) and stage.transparent:  # how it runs, not what it yields
        return True
    declared = stage.loader_records
    return declared is not None and declared.passes and (declared.any_workers or not one_to_one)


def _ends_walk(stage: Any) -> bool:
    """Whether `stage` is a loader's records: the shard's, or a Grain-order worker's share."""
    declared = stage.loader_records
    if declared is None or declared.passes:
        return False
    return declared.records or _is_records(stage.parent)


def _is_records(stage: Any) -> bool:
    declared = stage.loader_records
    return declared is not None and declared.records


def dataset_position(dataset: Dataset[Any], taken: int) -> int:
    """The position in `dataset` that Grain's `next_index` of `taken` names.

    Grain's `to_iter_dataset()` counts positions of the dataset it reads. Its
    DataLoader (as a dataset pipeline, with a `FlatMap`) reads the sampler's
    records so and applies every operation after; grainfn's loader does its
    maps, filters and batches inside the dataset, so `taken` records are a
    position found through those stages.

    Examples:
        >>> from grainfn import fn
        >>> dataset_position(fn.batch(2, fn.range(9)), 4)  # not a DataLoader's: as it is
        4
    """
    if not reads_loader_records(dataset):
        return taken
    return _position(_loader_stages(dataset, one_to_one=False), taken)


def reads_loader_records(dataset: Dataset[Any]) -> bool:
    """Whether `dataset` is a DataLoader's: its maps, filters and batches over sampled records."""
    stage = dataset
    while stage.loader_records is not None and stage.loader_records.passes:
        (stage,) = stage.parents
    return _ends_walk(stage)


_GRAIN_ARRAY_RECORD = re.compile(r"ArrayRecordDataSource\(hash_of_paths=([0-9a-f]{40})\)")
"""How Grain's DataLoader state names an ArrayRecord source: by a digest of its paths."""


def hash_of_paths(paths: Iterable[str]) -> str:
    """The digest Grain names an ArrayRecord source by: SHA-1 of its paths, one after another.

    Each path is hashed as it was given (the text `os.fspath` gives, UTF-8),
    with no separator and nothing else: no reader options, no file contents.

    Examples:
        >>> hash_of_paths(["a.array_record", "b.array_record"])
        '24c999ef2363ccd505379444c1a3244ea3afafef'
    """
    digest = hashlib.sha1(usedforsecurity=False)
    for path in paths:
        digest.update(path.encode())
    return digest.hexdigest()


def names_source(written: Any, source: Any) -> bool:
    """Whether Grain's `data_source` field `written` names this loader's `source`.

    Grain writes `ArrayRecordDataSource(hash_of_paths=<sha1>)` for its
    ArrayRecord source; it names a grainfn `ArrayRecordDataSource` whose
    paths, as given or made absolute, hash to the same digest (the same
    files, in the same order).

    Raises:
        ValueError: if `written` is Grain's name of an ArrayRecord source and
            this source's paths hash to another digest, naming both.

    Examples:
        >>> names_source("ArrayRecordDataSource(hash_of_paths=0123)", list(range(3)))
        False
    """
    match = _GRAIN_ARRAY_RECORD.fullmatch(written) if isinstance(written, str) else None
    if match is None or not isinstance(source, ArrayRecordDataSource):
        return False
    given, absolute = source.paths, tuple(source.file_paths().values())
    if match.group(1) in (hash_of_paths(given), hash_of_paths(absolute)):
        return True
    raise ValueError(
        f"State belongs to another DataLoader: Grain names its ArrayRecord source by the "
        f"SHA-1 of its paths, {match.group(1)}, and this loader's {len(given)} files hash to "
        f"{hash_of_paths(given)} (as given: {list(given[:2])}{', ...' if len(given) > 2 else ''}) "
        f"or {hash_of_paths(absolute)} (as absolute paths). Pass the same files, in the same "
        "order, spelt as they were given to Grain."
    )


def _refused(stage: Any, one_to_one: bool, written: bool = False) -> ValueError:
    why = (
        "with more than one worker, Grain's order depends on the worker count (each worker "
        "batches and filters its own records), so only maps carry over"
        if one_to_one
        else "its Grain state does not determine grainfn's"
    )
    if written:
        return ValueError(
            f"grainfn cannot write Grain's DataLoader state for the stage "
            f"{stage.describe_stage()!r}: {why}. Write it for Grain with worker_count=0 or 1."
        )
    return ValueError(
        f"A DataLoader state written by Grain cannot be read for the stage "
        f"{stage.describe_stage()!r}: {why}. Restart the data position, or save Grain's "
        "state with worker_count=0."
    )


def _integer(state: dict[str, Any], key: str, least: int = 0) -> int:
    value = state.get(key)
    if not records.is_saved_count(value, least):
        raise ValueError(
            f"Grain's DataLoader state should hold an integer >= {least} in {key!r}, "
            f"got {records.describe_value(value)}."
        )
    return value
