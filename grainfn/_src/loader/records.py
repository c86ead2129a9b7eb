"""Records: an element with the metadata a DataLoader carries along with it.

A sampler names each record to read with a `RecordMetadata`: the sampler index,
the key of the record in the source, and the random generator of the record's
random transformations. A DataLoader passes `Record(metadata, data)` between
its operations and yields the data.

The generator is made on first use: building a Philox generator costs
microseconds, more than many whole pipelines spend on an element, and most
pipelines never draw from it. It is built from a seed sequence that hands
Philox its key directly (`PhiloxKey`): the same generator as
`Philox(key=key)`, without the operating-system entropy numpy gathers, and
then discards, when a key is passed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.random.bit_generator import ISeedSequence

T = TypeVar("T")

_WORD = (1 << 64) - 1


class PhiloxKey(ISeedSequence):
    """A seed sequence that gives Philox the key `key`: `Philox(PhiloxKey(k))` is `Philox(key=k)`.

    Examples:
        >>> a = np.random.Generator(np.random.Philox(PhiloxKey(7)))
        >>> b = np.random.Generator(np.random.Philox(key=7))
        >>> bool(a.random() == b.random())
        True
    """

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        """The key as Philox reads it: two little-endian 64-bit words."""
        if n_words != 2 or np.dtype(dtype) != np.uint64:
            raise ValueError(f"PhiloxKey gives Philox's key only, not {n_words} words of {dtype}.")
        return np.array([self.key & _WORD, (self.key >> 64) & _WORD], dtype=np.uint64)


class RecordMetadata:
    """Where a record comes from: sampler index, source key, and its random generator.

    Attributes:
        index: The record's index in the sampler (global across shards).
        record_key: The key the record is read at in the data source; None
            after a many-to-one operation such as a batch.
        rng: The record's `np.random.Generator`, or None if the sampler has no
            seed. Successive random operations draw from the same generator.

    Examples:
        >>> meta = RecordMetadata.seeded(index=3, record_key=7, key=12)
        >>> meta
        RecordMetadata(index=3, record_key=7, rng=Generator(Philox))
        >>> int(meta.rng.integers(100)) == int(RecordMetadata.seeded(3, 7, 12).rng.integers(100))
        True
    """

    __slots__ = ("_rng", "_rng_key", "index", "record_key")

    def __init__(
        self, index: int, record_key: int | None = None, rng: np.random.Generator | None = None
    ) -> None:
        self.index = index
        self.record_key = record_key
        self._rng = rng
        self._rng_key: int | None = None

    @classmethod
    def seeded(cls, index: int, record_key: int | None, key: int | None) -> RecordMetadata:
        """Metadata whose generator, if `key` is not None, is `Philox(key=key)`, made on use."""
        meta = cls(index, record_key)
        meta._rng_key = key
        return meta

    @property
    def rng(self) -> np.random.Generator | None:
        """The record's random generator (made on first use), or None without a seed."""
        if self._rng is None and self._rng_key is not None:
            key = PhiloxKey(self._rng_key)  # any ISeedSequence works; the stubs say SeedSequence
            self._rng = np.random.Generator(np.random.Philox(key))  # type: ignore[arg-type]
        return self._rng

    @rng.setter
    def rng(self, value: np.random.Generator | None) -> None:
        self._rng = value
        self._rng_key = None

    def remove_record_key(self) -> RecordMetadata:
        """The same metadata without a record key, with the same generator."""
        if self.record_key is None:
            return self
        meta = RecordMetadata(self.index, None, self._rng)
        meta._rng_key = self._rng_key
        return meta

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return (self.index, self.record_key, self._rng_key) == (
            other.index,
            other.record_key,
            other._rng_key,
        ) and self._rng is other._rng

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._rng is not None:  # a generator given or built: name its bit generator
            rng = f"Generator({type(self._rng.bit_generator).__name__})"
        else:  # one to build from a key: a Philox
            rng = "Generator(Philox)" if self._rng_key is not None else "None"
        return f"RecordMetadata(index={self.index}, record_key={self.record_key}, rng={rng})"


@dataclasses.dataclass(slots=True)
class Record(Generic[T]):
    """An element and its metadata, as a DataLoader's operations pass it along.

    Examples:
        >>> Record(RecordMetadata(0, 5), "five").data
        'five'
    """

    metadata: RecordMetadata
    data: T


def record_data(record: Record[Any]) -> Any:
    """The data of a record: the last stage of every DataLoader pipeline."""
    return record.data
