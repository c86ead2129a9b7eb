"""Grain builders for the pipeline specs of `grainfn.testing`: the differential-test oracle.

The builders take the Grain module to use, so the same code builds a pipeline
with Grain itself and with grainfn's Grain API (`import grainfn as grain`).
"""

from __future__ import annotations

from typing import Any

from grainfn.testing import (
    FILTERS,
    MAPS,
    RANDOM_MAPS,
    build_dataset,
    build_stream,
    dataset_specs,
    stream_specs,
    with_index,
)

__all__ = [
    "apply_grain",
    "build_dataset",
    "build_grain",
    "build_grain_stream",
    "build_stream",
    "dataset_specs",
    "stream_specs",
]


def grain_module() -> Any:
    import grain

    return grain


def build_grain(spec: tuple[Any, ...], grain: Any = None) -> Any:
    """The MapDataset of a dataset spec, built with `grain` (Grain itself by default)."""
    grain = grain or grain_module()
    head, *ops = spec
    if head[0] == "range":
        ds = grain.MapDataset.range(head[1])
    elif head[0] == "mix":
        ds = grain.MapDataset.mix([build_grain(p, grain) for p in head[1]], head[2])
    else:
        ds = grain.MapDataset.concatenate([build_grain(p, grain) for p in head[1]])
    for op in ops:
        ds = apply_grain(op, ds, grain)
    return ds


def apply_grain(op: tuple[Any, ...], ds: Any, grain: Any) -> Any:
    """`ds` through the stage of a map-level spec op, built with `grain`."""
    kind = op[0]
    if kind == "seed":
        return ds.seed(op[1])
    if kind == "shuffle":
        return ds.shuffle(seed=op[1])
    if kind == "slice":
        return ds.slice(slice(*op[1:]))
    if kind == "take":
        return _grain_take(ds, [p % len(ds) for p in op[1]] if len(ds) else [], grain)
    if kind == "repeat":
        return ds.repeat(op[1], reseed_each_epoch=op[2])
    if kind == "map":
        return ds.map(MAPS[op[1]])
    if kind == "random_map":
        return ds.random_map(RANDOM_MAPS[op[1]], seed=op[2])
    if kind == "map_with_index":
        return ds.map_with_index(with_index)
    if kind == "filter":
        return ds.filter(FILTERS[op[1]])
    return ds.batch(op[1], drop_remainder=op[2])


def _grain_take(ds: Any, positions: list[int], grain: Any) -> Any:
    """Grain has no positional selection; `select_from_datasets` with a table is its equivalent."""

    class Table:
        def __len__(self) -> int:
            return len(positions)

        def __getitem__(self, index: int) -> tuple[int, int]:
            epoch, offset = divmod(index, len(positions))
            return 0, positions[offset] + epoch * len(ds)

    return grain.MapDataset.select_from_datasets([ds], Table())


def build_grain_stream(spec: tuple[Any, ...], grain: Any = None) -> Any:
    """The IterDataset of a stream spec, built with `grain` (Grain itself by default)."""
    grain = grain or grain_module()
    head, *ops = spec
    if head[0] == "mix":
        stream = grain.IterDataset.mix([build_grain_stream(p, grain) for p in head[1]], head[2])
    else:
        stream = build_grain(head[1], grain).to_iter_dataset(
            grain.ReadOptions(num_threads=0), allow_nones=head[2]
        )
    for op in ops:
        if op[0] == "limit":
            stream = grain.experimental.LimitIterDataset(stream, op[1])
        elif op[0] == "repeat":
            stream = grain.experimental.RepeatIterDataset(stream, op[1])
        else:
            stream = apply_grain(op, stream, grain)
    return stream
