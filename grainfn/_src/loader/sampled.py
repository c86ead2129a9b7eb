"""The records one DataLoader shard reads: a dataset over a sampler and a source.

Position `i` of shard `s` of `n` is sampler index `g = i * n + s`; its element
is `Record(sampler[g], source[sampler[g].record_key])`. For grainfn's samplers
a block of positions resolves its keys in one vectorized call and reads the
source with its batched `__getitems__` where it has one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.dataset import OneParent, set_length
from grainfn._src.core.loader_records import SHARD_RECORDS
from grainfn._src.loader.records import Record, RecordMetadata
from grainfn._src.loader.samplers import BaseSampler, shard_length
from grainfn._src.loader.sharding import ShardOptions
from grainfn._src.stages.sources import SourceDataset


@dataclasses.dataclass(frozen=True, repr=False)
class SampledDataset(OneParent):
    """The records shard `shard` reads, in order: `Record(metadata, data)` per position.

    Attributes:
        parent: The source, as a dataset.
        sampler: Grain's Sampler protocol: `sampler[g]` is a RecordMetadata.
        shard: Which shard of the sampler's indices this dataset reads.
    """

    loader_records = SHARD_RECORDS

    sampler: Any
    shard: ShardOptions

    def __post_init__(self) -> None:
        set_length(self, shard_length(self.sampler, self.shard))

    def _sampler_index(self, index: int) -> int:
        return (index % self.length) * self.shard.shard_count + self.shard.shard_index

    def _get(self, index: int) -> Record[Any]:
        meta = self._meta(self._sampler_index(index), index)
        return Record(meta, self.parent.get(meta.record_key))

    def _meta(self, sampler_index: int, index: int) -> Any:
        """`sampler[sampler_index]`: a user's sampler's StopIteration is an error, not the end."""
        try:
            return self.sampler[sampler_index]
        except StopIteration as error:
            validate.note_user_error(error, self.describe_stage(), f"position {index}")
            raise

    def _get_many(self, indices: np.ndarray) -> list[Any]:
        sampler_indices = (indices % self.length) * self.shard.shard_count + self.shard.shard_index
        if isinstance(self.sampler, BaseSampler):
            keys = self.sampler.record_keys(sampler_indices)
            seed = self.sampler.seed
            metas = [
                RecordMetadata.seeded(g, key, None if seed is None else seed + g)
                for g, key in zip(sampler_indices.tolist(), keys)
            ]
        else:
            metas = [self._meta(g, i) for g, i in zip(sampler_indices.tolist(), indices.tolist())]
            keys = [meta.record_key for meta in metas]  # type: ignore[misc]
        values = self.parent.get_many(np.asarray(keys, dtype=np.int64))
        return [Record(meta, value) for meta, value in zip(metas, values)]

    def describe_stage(self) -> str:
        """The sampler's repr and the shard."""
        shard = self.shard
        return f"sample({self.sampler!r}, shard {shard.shard_index} of {shard.shard_count})"


def sampled(source: Any, sampler: Any, shard: ShardOptions) -> SampledDataset:
    """The dataset of records shard `shard` reads from `source` through `sampler`."""
    return SampledDataset(SourceDataset(source), sampler, shard)
