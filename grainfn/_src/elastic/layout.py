"""Which rows of a global batch each host computes, from a fixed number of logical shards.

A global batch of `global_batch_size` rows is defined by the logical shards
alone: logical shard `s` gives rows `[s * r, (s + 1) * r)`, where
`r = global_batch_size // num_logical_shards`. With `num_hosts` hosts, host
`h` runs the contiguous logical shards `[h * k, (h + 1) * k)`,
`k = num_logical_shards // num_hosts`, so its rows are one contiguous slice
of the global batch, and stacking the hosts' rows in host order gives the
same global batch for every host count that divides `num_logical_shards`.
"""

from __future__ import annotations

import dataclasses

from grainfn._src.core import validate


def valid_host_counts(num_logical_shards: int) -> tuple[int, ...]:
    """The host counts `num_logical_shards` logical shards can be spread over: its divisors.

    Examples:
        >>> valid_host_counts(12)
        (1, 2, 3, 4, 6, 12)
    """
    count = validate.check_positive_int(num_logical_shards, "num_logical_shards")
    return tuple(d for d in range(1, count + 1) if count % d == 0)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The logical shards of a global batch, and the part one host computes.

    Attributes:
        global_batch_size: Rows in one global batch, a multiple of `num_logical_shards`.
        num_logical_shards: Independent streams the global batch is cut from;
            chosen once for a run, since the data depends on it.
        host: This host's index, in `[0, num_hosts)`.
        num_hosts: Hosts sharing the global batch; a divisor of `num_logical_shards`.

    Examples:
        >>> layout = Layout(global_batch_size=12, num_logical_shards=6, host=1, num_hosts=3)
        >>> layout.shards, layout.rows_per_shard, layout.rows
        (range(2, 4), 2, range(4, 8))
        >>> Layout(global_batch_size=12, num_logical_shards=6, host=0, num_hosts=4)
        Traceback (most recent call last):
        ...
        ValueError: 6 logical shards cannot be spread evenly over 4 hosts: the host count must \
divide the number of logical shards, so 6 logical shards allow 1, 2, 3 or 6 hosts. Choose \
num_logical_shards as a multiple of every host count the run may have (12 allows 1, 2, 3, \
4, 6 or 12).
    """

    global_batch_size: int
    num_logical_shards: int
    host: int = 0
    num_hosts: int = 1

    def __post_init__(self) -> None:
        size = validate.check_positive_int(self.global_batch_size, "global_batch_size")
        shards = validate.check_positive_int(self.num_logical_shards, "num_logical_shards")
        hosts = validate.check_positive_int(self.num_hosts, "num_hosts (shard_count)")
        host = validate.check_nonnegative_int(self.host, "host (shard_index)")
        if host >= hosts:
            raise ValueError(
                f"host (shard_index) must be in [0, {hosts}) for {hosts} hosts, got {host}."
            )
        if shards % hosts:
            allowed = _or_list(valid_host_counts(shards))
            raise ValueError(
                f"{shards} logical shards cannot be spread evenly over {hosts} hosts: the host "
                f"count must divide the number of logical shards, so {shards} logical shards "
                f"allow {allowed} hosts. Choose num_logical_shards as a multiple of every host "
                "count the run may have (12 allows 1, 2, 3, 4, 6 or 12)."
            )
        if size % shards:
            raise ValueError(
                f"global_batch_size {size} is not a multiple of num_logical_shards {shards}: "
                "every logical shard gives the same number of rows to each global batch. "
                f"Use a global batch size of {_multiples_near(size, shards)}, or another "
                "number of logical shards."
            )
        for name, value in (
            ("global_batch_size", size),
            ("num_logical_shards", shards),
            ("host", host),
            ("num_hosts", hosts),
        ):
            object.__setattr__(self, name, value)

    @property
    def rows_per_shard(self) -> int:
        """Rows each logical shard gives to one global batch."""
        return self.global_batch_size // self.num_logical_shards

    @property
    def shards_per_host(self) -> int:
        """Logical shards each host runs."""
        return self.num_logical_shards // self.num_hosts

    @property
    def shards(self) -> range:
        """The logical shards this host runs, in global-batch order."""
        first = self.host * self.shards_per_host
        return range(first, first + self.shards_per_host)

    @property
    def rows(self) -> range:
        """The rows of each global batch this host computes."""
        per_host = self.global_batch_size // self.num_hosts
        return range(self.host * per_host, (self.host + 1) * per_host)

    def for_host(self, host: int, num_hosts: int) -> Layout:
        """The same logical shards and global batch, computed by another host of `num_hosts`."""
        return dataclasses.replace(self, host=host, num_hosts=num_hosts)


def _or_list(values: tuple[int, ...]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _multiples_near(size: int, shards: int) -> str:
    """The multiples of `shards` just below and above `size`, as a message offers them."""
    below = size - size % shards
    above = below + shards
    return f"{below} or {above}" if below else str(above)
