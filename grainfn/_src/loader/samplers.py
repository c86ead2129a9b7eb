"""Samplers: which record a DataLoader reads at each sampler index.

A sampler maps a global index `g` to a `RecordMetadata` (the record key to read
and the record's generator, `Philox(key=seed + g)`), exactly as Grain's do.
grainfn's samplers also resolve a whole block of indices in one vectorized
call (`record_keys`), which the DataLoader uses for blocks of positions.
"""

from __future__ import annotations

import abc
import sys
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset
from grainfn._src.loader.records import RecordMetadata
from grainfn._src.loader.sharding import NoSharding, ShardOptions, check_shard_options, even_split


@runtime_checkable
class Sampler(Protocol):
    """What a DataLoader needs of a sampler: `sampler[g]` for every index `g` it reads.

    `len(sampler)`, if defined, is the number of indices; otherwise the
    DataLoader finds the first index that raises IndexError.
    """

    def __getitem__(self, index: int) -> RecordMetadata:
        """The metadata of the record at sampler index `index`."""
        ...


class BaseSampler(abc.ABC):
    """What grainfn's samplers share: records, sharding and the seed of the generators.

    It also names the block methods the DataLoader uses instead of `sampler[g]`
    one index at a time.
    """

    def __init__(
        self, num_records: Any, shard_options: ShardOptions | None, seed: Any, name: str
    ) -> None:
        self._num_records = validate.check_positive_int(
            num_records, "num_records", validate.INT64_MAX
        )
        self._shard_options = check_shard_options(shard_options or NoSharding())
        self._seed = None if seed is None else validate.check_seed(seed, f"{name} seed")

    @property
    def num_records(self) -> int:
        """The number of records the sampler reads from: keys are in `[0, num_records)`."""
        return self._num_records

    @property
    def shard_options(self) -> ShardOptions:
        """The sharding the sampler was made with."""
        return self._shard_options

    @property
    def seed(self) -> int | None:
        """The seed of the records' generators (and of the shuffle), or None."""
        return self._seed

    @abc.abstractmethod
    def record_keys(self, indices: np.ndarray) -> list[int]:
        """The record keys of a block of valid sampler indices."""

    @abc.abstractmethod
    def shard_length(self, options: ShardOptions) -> int:
        """How many sampler indices the DataLoader shard `options` reads."""


class SequentialSampler(BaseSampler):
    """The records in order, once: index `g` reads record `g`.

    With sharding the DataLoader reads every `shard_count`-th index from
    `shard_index`; `drop_remainder` first cuts the records to a multiple of
    `shard_count`.

    Examples:
        >>> sampler = SequentialSampler(5, seed=1)
        >>> len(sampler), sampler[3].record_key
        (5, 3)
    """

    def __init__(
        self, num_records: int, shard_options: ShardOptions | None = None, seed: int | None = None
    ) -> None:
        super().__init__(num_records, shard_options, seed, "SequentialSampler")
        count = self._shard_options.shard_count
        self._max_index = (
            self._num_records // count * count
            if self._shard_options.drop_remainder
            else self._num_records
        )

    def __len__(self) -> int:
        return self._max_index

    def __getitem__(self, index: int) -> RecordMetadata:
        index = _check_sampler_index(index, self._max_index)
        return RecordMetadata.seeded(index, index, _rng_key(self._seed, index))

    def record_keys(self, indices: np.ndarray) -> list[int]:
        """The record keys of a block of valid sampler indices."""
        return indices.tolist()

    def shard_length(self, options: ShardOptions) -> int:
        """How many indices the shard `options` reads: every one congruent to its index."""
        return _congruent_count(self._max_index, options)

    def __repr__(self) -> str:
        return (
            f"SequentialSampler(num_records={self._num_records}, "
            f"shard_options={self._shard_options!r})"
        )


class IndexSampler(BaseSampler):
    """Grain's sampler: a shard of the records, shuffled anew each epoch, for some epochs.

    Index `g` reads the `g // shard_count`-th key of this shard's records
    (shuffled with `seed`, a new order each epoch), and its random generator is
    `Philox(key=seed + g)`: the same records and draws as Grain's IndexSampler.

    Args:
        num_records: The number of records in the source, > 0.
        shard_options: Which shard of the records to read (default: all).
        shuffle: Whether to shuffle the records (needs `seed`).
        num_epochs: How many passes over the records; None repeats forever.
        seed: The seed of the shuffle and of the records' generators, in
            [0, 2**32).

    Examples:
        >>> sampler = IndexSampler(6, shuffle=True, num_epochs=2, seed=0)
        >>> len(sampler)
        12
        >>> sorted(sampler[g].record_key for g in range(6))
        [0, 1, 2, 3, 4, 5]
    """

    def __init__(
        self,
        num_records: int,
        shard_options: ShardOptions | None = None,
        shuffle: bool = False,
        num_epochs: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(num_records, shard_options, seed, "IndexSampler")
        if num_epochs is not None:
            num_epochs = validate.check_positive_int(num_epochs, "num_epochs", validate.INT64_MAX)
        shuffle = validate.check_flag(shuffle, "IndexSampler shuffle")
        if shuffle and seed is None:
            raise ValueError(
                "IndexSampler(shuffle=True) needs a seed: pass seed=<int in [0, 2**32)>."
            )
        self._shuffle = shuffle
        self._num_epochs = num_epochs
        self._keys = self._key_dataset()
        self._max_index: int | None = None
        if num_epochs is not None:
            if num_epochs * self._num_records > validate.INT64_MAX:
                raise ValueError(
                    f"IndexSampler reads num_epochs * num_records indices, which must be at most "
                    f"2**63 - 1: got {num_epochs} epochs of {self._num_records} records. Pass "
                    "num_epochs=None to repeat forever."
                )
            self._max_index = num_epochs * self._num_records
            if self._shard_options.drop_remainder and self._shard_options.shard_count > 1:
                count = self._shard_options.shard_count
                self._max_index = min(self._max_index, self._keys.length * count * num_epochs)

    def _key_dataset(self) -> Dataset[int]:
        keys = fn.range(self._num_records)
        if not isinstance(self._shard_options, NoSharding):
            start, stop = even_split(self._num_records, self._shard_options)
            if start == stop:
                raise ValueError(
                    f"Shard {self._shard_options.shard_index} of "
                    f"{self._shard_options.shard_count} gets no records of {self._num_records}: "
                    "use fewer shards or more records."
                )
            keys = fn.slice(slice(start, stop), keys)
        if self._shuffle:
            keys = fn.shuffle(keys, seed=self._seed)
        return keys

    def __len__(self) -> int:
        return sys.maxsize if self._max_index is None else self._max_index

    def __getitem__(self, index: int) -> RecordMetadata:
        index = _check_sampler_index(index, self._max_index)
        key = self._keys.get(index // self._shard_options.shard_count)
        return RecordMetadata.seeded(index, key, _rng_key(self._seed, index))

    def record_keys(self, indices: np.ndarray) -> list[int]:
        """The record keys of a block of valid sampler indices, in one vectorized call."""
        return self._keys.get_many(indices // self._shard_options.shard_count)  # type: ignore[return-value]

    def shard_length(self, options: ShardOptions) -> int:
        """How many indices the DataLoader shard `options` reads.

        With the sampler's own sharding, every record of the shard once per
        epoch; otherwise every index congruent to the shard's index. (Grain
        reads `len(sampler) // shard_count` indices in both cases, which loses
        records or reads extra ones when the shards are uneven.)
        """
        count = self._shard_options.shard_count
        if count > 1 and options == self._shard_options:
            if self._num_epochs is None:
                return sys.maxsize // count
            return self._num_epochs * self._keys.length
        return _congruent_count(len(self), options)

    def __repr__(self) -> str:
        return (
            f"IndexSampler(num_records={self._num_records}, "
            f"shard_options={self._shard_options!r}, shuffle={self._shuffle}, "
            f"num_epochs={self._num_epochs}, seed={self._seed})"
        )


def _check_sampler_index(index: Any, max_index: int | None) -> int:
    index = validate.check_integer(index, "sampler index")
    if index < 0 or (max_index is not None and index >= max_index):
        bound = "inf" if max_index is None else str(max_index)
        raise IndexError(f"Sampler index {index} is out of range: valid indices are [0, {bound}).")
    return index


def _rng_key(seed: int | None, index: int) -> int | None:
    return None if seed is None else seed + index


def _congruent_count(length: int, options: ShardOptions) -> int:
    """The number of indices `g < length` with `g % shard_count == shard_index`."""
    if length >= sys.maxsize:
        return sys.maxsize // options.shard_count
    return max(0, (length - options.shard_index + options.shard_count - 1) // options.shard_count)


def sampler_length(sampler: Any) -> int:
    """`len(sampler)`, or the first index at which `sampler[i]` raises IndexError."""
    if hasattr(sampler, "__len__"):
        return validate.check_length(sampler, f"the sampler {type(sampler).__name__}")
    low, high = 0, sys.maxsize
    while low < high:
        middle = (low + high) // 2
        try:
            sampler[middle]
        except IndexError:
            high = middle
        else:
            low = middle + 1
    return low


def shard_length(sampler: Any, options: ShardOptions) -> int:
    """How many sampler indices the DataLoader shard `options` reads."""
    if isinstance(sampler, BaseSampler):
        return sampler.shard_length(options)
    return _congruent_count(sampler_length(sampler), options)
