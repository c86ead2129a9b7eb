"""States written by Grain itself, read into grainfn's records where the mapping is exact.

A run that moves from Grain to grainfn keeps its data position: Grain's
`get_state()` of a pipeline (also inside an Orbax checkpoint Grain wrote) is
turned into the state record of the same grainfn pipeline. Each stage reads
its part of Grain's nested dict:

- `to_iter_dataset()`: `{"next_index": n}`, the position in the MapDataset;
- `map`, `filter`, `batch` and the transparent stages (prefetch, options): their
  parent's state;
- `random_map`: `{"parent": ..., "index_for_rng": n}`;
- `map_with_index`: `{"parent": ..., "counter": n}`;
- `IterDataset.mix`: `{"parents": [...] or {name: ...}, "index": i, "stop": bool}`.

Any other stage is refused with a message naming it: its Grain state does
not determine grainfn's.
"""

from __future__ import annotations

from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream
from grainfn._src.stages.batch import BatchedStream
from grainfn._src.stages.filter import FilteredStream
from grainfn._src.stages.map import CountState, IndexMappedStream, MappedStream, RandomMappedStream
from grainfn._src.stages.mix import MixedStream, MixState

_SAME_STATE = (MappedStream, FilteredStream, BatchedStream)
"""Stages whose Grain state is their parent's, as grainfn's is; so is a transparent
stage's (prefetch, options, cache)."""


def looks_like_grain(state: Any) -> bool:
    """Whether a state dict is Grain's own (grainfn's name their version and pipeline)."""
    return isinstance(state, dict) and "version" not in state and "pipeline" not in state


def from_grain(stream: Stream[Any], state: Any, path: str = "state") -> Any:
    """The record of `stream` at the position Grain's state `state` names.

    Raises:
        ValueError: naming the stage whose Grain state cannot be read, or the
            key that is missing.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(9).to_iter_dataset().map(str).batch(2)
        >>> from_grain(ds.core, {"next_index": 4})
        DatasetPosition(position=4)
    """
    if isinstance(stream, FromDatasetStream):
        return records.DatasetPosition(_count(state, "next_index", path))
    if isinstance(stream, _SAME_STATE) or stream.transparent:
        (parent,) = stream.parents
        return from_grain(parent, state, path)
    if isinstance(stream, RandomMappedStream | IndexMappedStream):
        key = "index_for_rng" if isinstance(stream, RandomMappedStream) else "counter"
        parent = from_grain(stream.parent, _field(state, "parent", path), f"{path}.parent")
        return CountState(_count(state, key, path), parent)
    if isinstance(stream, MixedStream):
        parents = _field(state, "parents", path)
        if isinstance(parents, dict) and stream.names is not None:  # a mix of named components
            parents = [parents.get(name) for name in stream.names]
        if not isinstance(parents, list) or len(parents) != len(stream.components):
            raise ValueError(
                f"Grain's {path}.parents must list {len(stream.components)} component states, "
                f"got {parents!r}."
            )
        components = tuple(
            from_grain(c, s, f"{path}.parents[{i}]")
            for i, (c, s) in enumerate(zip(stream.components, parents))
        )
        return MixState(_count(state, "index", path), bool(_field(state, "stop", path)), components)
    raise ValueError(
        f"A state written by Grain cannot be read for the stage {stream.describe_stage()!r}: "
        "its Grain state does not determine grainfn's. Grain states are read for "
        "to_iter_dataset, map, filter, batch, random_map, map_with_index, mix and the "
        "prefetch stages; restart the data position for this pipeline."
    )


def _field(state: Any, key: str, path: str) -> Any:
    if not isinstance(state, dict) or key not in state:
        raise ValueError(
            f"Grain's {path} should hold {key!r} for this pipeline, got {state!r}: it is the "
            "state of another pipeline."
        )
    return state[key]


def _count(state: Any, key: str, path: str) -> int:
    value = _field(state, key, path)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Grain's {path}.{key} must be an integer >= 0, got {value!r}.")
    return value
