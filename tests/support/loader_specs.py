"""DataLoader pipelines as data, built with Grain or with grainfn from the same spec.

A spec is `(num_records, sampler, loader_shard, operations)`: the sampler's
arguments, the DataLoader's shard `(index, count, drop_remainder)` or None, and
operation tuples. `build_loader(grain, spec, ...)` builds it with either module,
so the differential tests compare the two on identical code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

OFFSET = 1000
"""Record `k` of the source is `OFFSET + k`, so keys and values never coincide."""


def make_operation(grain: Any, op: tuple[Any, ...]) -> Any:
    """The transformation object of one operation tuple, with `grain`'s base classes."""
    kind = op[0]
    if kind == "map":

        class Affine(grain.transforms.Map):
            def map(self, x: Any) -> Any:
                return x * 3 + op[1]

        return Affine()
    if kind == "random_map":

        class Jitter(grain.transforms.RandomMap):
            def random_map(self, x: Any, rng: np.random.Generator) -> Any:
                return x + rng.integers(0, 1000)

        return Jitter()
    if kind == "filter":

        class Sieve(grain.transforms.Filter):
            def filter(self, x: Any) -> bool:
                return int(np.sum(x)) % op[1] != 0

        return Sieve()
    if kind == "flat_map":

        class Split(grain.experimental.FlatMapTransform):
            max_fan_out = op[1]

            def flat_map(self, x: Any) -> list[Any]:
                return [x + j for j in range(int(np.sum(x)) % op[1] + 1)]

        return Split()
    if kind == "batch":
        return grain.transforms.Batch(op[1], drop_remainder=op[2])
    raise ValueError(f"unknown operation {op!r}")


def build_sampler(grain: Any, spec: tuple[Any, ...]) -> Any:
    """The IndexSampler of `spec`, built with `grain`."""
    num_records, (shuffle, num_epochs, seed, sampler_shard), _, _ = spec
    sampler_options = (
        grain.sharding.NoSharding()
        if sampler_shard is None
        else grain.sharding.ShardOptions(*sampler_shard)
    )
    return grain.samplers.IndexSampler(
        num_records,
        shard_options=sampler_options,
        shuffle=shuffle,
        num_epochs=num_epochs,
        seed=seed,
    )


def loader_shard_count(spec: tuple[Any, ...]) -> int:
    """The number of shards the DataLoader of `spec` splits the sampler's indices into."""
    sampler_shard, loader_shard = spec[1][3], spec[2]
    chosen = loader_shard or sampler_shard
    return 1 if chosen is None else chosen[1]


def build_loader(
    grain: Any, spec: tuple[Any, ...], worker_count: int = 0, source: Any = None, **options: Any
) -> Any:
    """The DataLoader of `spec`, built with `grain` (Grain itself or grainfn), and `options`."""
    num_records, _, loader_shard, operations = spec
    sampler = build_sampler(grain, spec)
    shard = None if loader_shard is None else grain.sharding.ShardOptions(*loader_shard)
    return grain.DataLoader(
        data_source=source if source is not None else [OFFSET + k for k in range(num_records)],
        sampler=sampler,
        operations=[make_operation(grain, op) for op in operations],
        worker_count=worker_count,
        shard_options=shard,
        **options,
    )


def assert_same_elements(ours: Any, expected: Any, where: str = "elements") -> None:
    """Recursive equality: the same types (scalars too), dtypes, shapes and values."""
    if isinstance(ours, np.ndarray) or isinstance(expected, np.ndarray):
        assert isinstance(ours, np.ndarray) and isinstance(expected, np.ndarray), where
        assert ours.dtype == expected.dtype, f"{where}: {ours.dtype} != {expected.dtype}"
        np.testing.assert_array_equal(ours, expected, err_msg=where)
    elif isinstance(expected, (list, tuple)):
        assert type(ours) is type(expected) and len(ours) == len(expected), where
        for i, (a, b) in enumerate(zip(ours, expected)):
            assert_same_elements(a, b, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(ours, dict) and list(ours) == list(expected), where
        for key in expected:
            assert_same_elements(ours[key], expected[key], f"{where}[{key!r}]")
    else:
        assert type(ours) is type(expected) and ours == expected, (
            f"{where}: {ours!r} != {expected!r}"
        )


@st.composite
def loader_specs(draw: Any, max_records: int = 30, batches: bool = True) -> tuple[Any, ...]:
    """Random DataLoader specs: sharding, shuffles, epochs, seeds and operations."""
    count = draw(st.integers(1, 3))
    num_records = draw(st.integers(count, max_records))
    index = draw(st.integers(0, count - 1))
    drop = draw(st.booleans())
    shard = (index, count, drop)
    shuffle = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1)) if shuffle else draw(st.none() | st.integers(0, 99))
    num_epochs = draw(st.sampled_from([1, 2, 3, None]))
    # The sampler shards like the loader (grain.load's way), or not at all (interleaved).
    sampler_shard = draw(st.sampled_from([shard, None]))
    loader_shard = draw(st.sampled_from([shard, None])) if sampler_shard else shard
    # A filter could drop every record of an endless sampler, and reading would never end.
    kinds = ["map", "flat_map"] + (["batch"] if batches else [])
    if num_epochs is not None:
        kinds.append("filter")
    if seed is not None:
        kinds.append("random_map")
    operations: list[tuple[Any, ...]] = []
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=4)):
        if kind == "flat_map" and "random_map" in kinds:
            kinds.remove("random_map")  # flat_map's parts have no generator, in Grain too
        if kind == "map":
            operations.append(("map", draw(st.integers(0, 5))))
        elif kind == "filter":
            operations.append(("filter", draw(st.integers(2, 4))))
        elif kind == "flat_map":
            operations.append(("flat_map", draw(st.integers(1, 3))))
        elif kind == "batch" and kind in kinds:
            kinds.remove("batch")  # a second batch would stack a short last batch with full ones
            operations.append(("batch", draw(st.integers(1, 5)), draw(st.booleans())))
        elif kind in kinds:
            operations.append(("random_map",))
    return (num_records, (shuffle, num_epochs, seed, sampler_shard), loader_shard, operations)
