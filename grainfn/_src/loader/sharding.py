"""Shard options: which part of the data one process (one host) reads.

`ShardOptions(shard_index, shard_count, drop_remainder)` has Grain's fields and
meaning. `even_split` is the one rule every user of the options follows: shard
`i` of `n` takes a contiguous run of the records, the first `len % n` shards
one record more unless `drop_remainder`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core import validate
from grainfn._src.index import slicing


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """Which shard of the data this process reads.

    Attributes:
        shard_index: This process's shard, in `[0, shard_count)`.
        shard_count: The number of shards (processes) the data is split into.
        drop_remainder: If True every shard has `len // shard_count` records
            and the rest are dropped; if False the first `len % shard_count`
            shards take one record more.

    Examples:
        >>> ShardOptions(shard_index=1, shard_count=4)
        ShardOptions(shard_index=1, shard_count=4, drop_remainder=False)
        >>> ShardOptions(shard_index=4, shard_count=4)
        Traceback (most recent call last):
        ...
        ValueError: shard_index must be in [0, shard_count) = [0, 4), got 4.
    """

    shard_index: int
    shard_count: int
    drop_remainder: bool = False

    def __post_init__(self) -> None:
        count = validate.check_positive_int(self.shard_count, "shard_count")
        index = validate.check_integer(self.shard_index, "shard_index")
        if not 0 <= index < count:
            raise ValueError(
                f"shard_index must be in [0, shard_count) = [0, {count}), got {index}."
            )
        if not isinstance(self.drop_remainder, bool):
            raise TypeError(f"drop_remainder must be a bool, got {self.drop_remainder!r}.")
        object.__setattr__(self, "shard_index", index)
        object.__setattr__(self, "shard_count", count)


class NoSharding(ShardOptions):
    """Every process reads all the data: shard 0 of 1.

    Examples:
        >>> NoSharding()
        NoSharding(shard_index=0, shard_count=1, drop_remainder=False)
    """

    def __init__(self) -> None:
        super().__init__(shard_index=0, shard_count=1, drop_remainder=False)


class ShardByJaxProcess(ShardOptions):
    """One shard per JAX process: `jax.process_index()` of `jax.process_count()`.

    Read when the options are made, so make them after
    `jax.distributed.initialize`. In a single process this is shard 0 of 1.

    Examples:
        >>> ShardByJaxProcess(drop_remainder=True)
        ShardByJaxProcess(shard_index=0, shard_count=1, drop_remainder=True)
    """

    def __init__(self, drop_remainder: bool = False) -> None:
        index, count = jax_process_index_and_count()
        super().__init__(shard_index=index, shard_count=count, drop_remainder=drop_remainder)


def jax_process_index_and_count() -> tuple[int, int]:
    """`(jax.process_index(), jax.process_count())`; JAX is imported only here."""
    import jax

    return jax.process_index(), jax.process_count()


def even_split(num_records: int, options: ShardOptions) -> tuple[int, int]:
    """The records `[start, stop)` of shard `options.shard_index`.

    Examples:
        >>> [even_split(10, ShardOptions(i, 3)) for i in range(3)]
        [(0, 4), (4, 7), (7, 10)]
        >>> [even_split(10, ShardOptions(i, 3, drop_remainder=True)) for i in range(3)]
        [(0, 3), (3, 6), (6, 9)]
    """
    part = slicing.contiguous_part(
        num_records, options.shard_index, options.shard_count, options.drop_remainder
    )
    return part.start, part.stop


def check_shard_options(options: Any, what: str = "shard_options") -> ShardOptions:
    """`options` if it is a ShardOptions; a clear error for anything else."""
    if not isinstance(options, ShardOptions):
        raise TypeError(
            f"{what} must be a grainfn ShardOptions (ShardOptions, NoSharding or "
            f"ShardByJaxProcess), got {validate.short_repr(options)} of type "
            f"{type(options).__name__}."
        )
    return options
