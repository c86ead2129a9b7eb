"""Grain builders for the pipeline specs of `grainfn.testing`: the differential-test oracle.

The builders take the Grain module to use, so the same code builds a pipeline
with Grain itself and with grainfn's Grain API (`import grainfn as grain`).
Each stage is built from its declaration (`RandomStage`): its Grain twin is
`ds.<function>(...)` (a head's `MapDataset.<function>(...)`, `IterDataset`'s
for streams) with the arguments its function of `grainfn.fn` takes, or the
`grain_twin` it declares where Grain's API differs (`take`, a stream's `limit`
and `repeat`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grainfn._src.core.random_stage import RandomStage
from grainfn._src.testing.specs import INTEGERS, Level, call_arguments, declared_stage
from grainfn.testing import build_dataset, build_stream, dataset_specs, stream_specs

__all__ = [
    "apply_grain",
    "build_dataset",
    "build_grain",
    "build_grain_stream",
    "build_stream",
    "dataset_specs",
    "grain_head",
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
    else:
        ds = grain_head(head, lambda part: build_grain(part, grain), "dataset", grain)
    for op in ops:
        ds = apply_grain(op, ds, grain)
    return ds


def apply_grain(op: tuple[Any, ...], ds: Any, grain: Any) -> Any:
    """`ds` through the Grain twin of a spec op's stage, at `ds`'s level, built with `grain`."""
    level: Level = "stream" if isinstance(ds, grain.IterDataset) else "dataset"
    stage = twin_of(declared_stage(level, op[0]))
    length = None if level == "stream" else len(ds)
    positional, keywords = call_arguments(stage, op, INTEGERS, length)
    if stage.grain_twin is not None:
        return stage.grain_twin(grain, *positional, ds, **keywords)
    return getattr(ds, stage.function)(*positional, **keywords)


def grain_head(
    head: tuple[Any, ...], build: Callable[[tuple[Any, ...]], Any], level: Level, grain: Any
) -> Any:
    """The Grain twin of a head spec's stage, each component built by `build`, with `grain`."""
    stage = twin_of(declared_stage(level, head[0], heads=True))
    positional, keywords = call_arguments(stage, head, INTEGERS, build=build)
    if stage.grain_twin is not None:
        return stage.grain_twin(grain, *positional, **keywords)
    kind = grain.MapDataset if level == "dataset" else grain.IterDataset
    return getattr(kind, stage.function)(*positional, **keywords)


def twin_of(stage: RandomStage) -> RandomStage:
    """`stage`, which must have a Grain twin (`in_grain`)."""
    if not stage.in_grain:
        raise ValueError(f"Grain has no twin of {stage.name!r}: its declaration is not in_grain.")
    return stage


def build_grain_stream(spec: tuple[Any, ...], grain: Any = None) -> Any:
    """The IterDataset of a stream spec, built with `grain` (Grain itself by default)."""
    grain = grain or grain_module()
    head, *ops = spec
    if head[0] == "stream":
        stream = build_grain(head[1], grain).to_iter_dataset(
            grain.ReadOptions(num_threads=0), allow_nones=head[2]
        )
    else:
        stream = grain_head(head, lambda part: build_grain_stream(part, grain), "stream", grain)
    for op in ops:
        stream = apply_grain(op, stream, grain)
    return stream
