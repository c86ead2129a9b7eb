"""Grain's `load` module: `load`, a DataLoader in one call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grainfn._src.facade.data_loader import DataLoader
from grainfn._src.facade.options import ReadOptions
from grainfn._src.loader.samplers import IndexSampler
from grainfn._src.loader.sharding import NoSharding, ShardOptions
from grainfn._src.stages.sources import check_source
from grainfn._src.transforms import Batch


def load(
    source: Any,
    *,
    num_epochs: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    shard_options: ShardOptions | None = None,
    transformations: Sequence[Any] = (),
    batch_size: int | None = None,
    drop_remainder: bool = False,
    worker_count: int | None = 0,
    read_options: ReadOptions | None = None,
) -> DataLoader:
    """A DataLoader over `source` with an IndexSampler: Grain's one-call `load`.

    Examples:
        >>> import grainfn as grain
        >>> loader = grain.load(list(range(6)), num_epochs=1, batch_size=4)
        >>> [batch.tolist() for batch in loader]
        [[0, 1, 2, 3], [4, 5]]
    """
    sampler = IndexSampler(
        num_records=len(check_source(source)),
        shard_options=shard_options or NoSharding(),
        shuffle=shuffle,
        num_epochs=num_epochs,
        seed=seed,
    )
    steps = list(transformations) if isinstance(transformations, Sequence) else [transformations]
    if batch_size is not None:
        steps.append(Batch(batch_size, drop_remainder=drop_remainder))
    return DataLoader(
        data_source=source,
        sampler=sampler,
        operations=steps,
        worker_count=worker_count,
        read_options=read_options,
    )
