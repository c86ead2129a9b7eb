"""One place that tells a saved state's format: grainfn's own dict, or Grain's.

A dataset iterator's state is grainfn's dict or Grain's (`decode_state`). A
DataLoader's is grainfn's (JSON naming its sampler and source, any worker
count), Grain's DataLoader state, or Grain's dataset state of a loader that
ran as a dataset pipeline (`decode_loader_state`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from grainfn._src.core.state import describe_value, is_saved_count
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.loader.sharding import ShardOptions

LOADER_FIELDS = ("sampler", "data_source")
"""The fields of a DataLoader state that name the loader, besides the pipeline."""


def looks_like_grain(state: Any) -> bool:
    """Whether a state dict is Grain's own (grainfn's name their version and pipeline).

    Examples:
        >>> looks_like_grain({"next_index": 3}), looks_like_grain({"version": 1, "state": {}})
        (True, False)
    """
    return isinstance(state, dict) and "version" not in state and "pipeline" not in state


def decode_state(codec: StateCodec, state: Any) -> Any:
    """The checked record of `codec.stream` that a saved state names, in either format.

    A state Grain wrote (also inside an Orbax checkpoint Grain wrote) is read
    where it determines grainfn's (`grainfn._src.grain_states.streams`).

    Raises:
        ValueError: if the state belongs to another pipeline or version, or is
            truncated, or is Grain's for a stage whose position it does not
            determine; the message names what differs.

    Examples:
        >>> from grainfn import fn
        >>> codec = StateCodec(fn.limit(3, fn.from_dataset(fn.range(9))))
        >>> decode_state(codec, {"parent": {"next_index": 2}, "count_elements_read": 2})
        LimitState(taken=2, parent=DatasetPosition(position=2))
        >>> decode_state(codec, codec.encode(codec.stream.init()))
        LimitState(taken=0, parent=DatasetPosition(position=0))
    """
    if looks_like_grain(state):
        # Imported here: Grain's states name every stage, packing and file formats included.
        from grainfn._src.grain_states.streams import from_grain

        record = from_grain(codec.stream, state)
        codec.stream.check_state(record)
        return record
    return codec.decode(state)


def decode_loader_state(
    codec: StateCodec,
    state: Any,
    identity: Mapping[str, Any],
    source: Any,
    shard: ShardOptions,
) -> Any:
    """The checked record of a DataLoader's stream (`codec.stream`) that a saved state names.

    Args:
        codec: The codec of the loader's stream.
        state: JSON bytes or text, or the dict: grainfn's DataLoader state
            (with any worker count), Grain's DataLoader state of the same
            sampler and source, or Grain's dataset state of a loader that ran
            as a dataset pipeline (one with a FlatMap).
        identity: The loader's own `sampler` and `data_source` names.
        source: The loader's data source, which Grain may name by the hash of
            its paths (`grainfn._src.grain_states.loaders.names_source`).
        shard: The loader's shard options (Grain's state counts a shard's records).

    Raises:
        TypeError: for a state that is not JSON bytes, text or a dict.
        ValueError: if the state is not JSON, or belongs to another loader
            (source, sampler or operations) or version; the message says what differs.
    """
    data = _parse_loader_state(state)
    if "parent" in data and looks_like_grain(data):  # Grain's loader over datasets
        return decode_state(codec, data)
    if not any(field in data for field in (*LOADER_FIELDS, "state")):
        raise ValueError(
            f"This is not a DataLoader state: get_state() of a DataLoader iterator gives JSON "
            f"with the fields {[*LOADER_FIELDS, 'state']} (and more); got fields "
            f"{sorted(data)}."
        )
    workers = data.get("worker_count", 0)  # informative: any worker count restores it
    if not is_saved_count(workers):
        raise ValueError(
            f"DataLoader state field 'worker_count' must be an integer >= 0, got "
            f"{describe_value(workers)}."
        )
    written_by_grain = "last_seen_indices" in data
    for field in LOADER_FIELDS:
        if field not in data:
            raise ValueError(f"DataLoader state is truncated: field {field!r} is missing.")
        if data[field] != identity[field] and not (
            written_by_grain and field == "data_source" and _grain_names(data[field], source)
        ):
            raise ValueError(
                f"State belongs to another DataLoader: its {field} is {data[field]!r}, "
                f"this loader's is {identity[field]!r}."
            )
    if written_by_grain:
        # Imported here: reading Grain's states is for runs moving from Grain, once.
        from grainfn._src.grain_states.loaders import loader_from_grain

        record = loader_from_grain(codec.stream, data, shard)
        codec.stream.check_state(record)
        return record
    pipeline = {
        key: value for key, value in data.items() if key not in (*LOADER_FIELDS, "worker_count")
    }
    return decode_state(codec, pipeline)


def _grain_names(written: Any, source: Any) -> bool:
    """Whether Grain's name of its source in a state names `source` (its hash of paths)."""
    from grainfn._src.grain_states.loaders import names_source

    return names_source(written, source)


def _parse_loader_state(state: Any) -> dict[str, Any]:
    if isinstance(state, dict):
        return state
    if not isinstance(state, (bytes, bytearray, str)):
        raise TypeError(
            f"DataLoader states are JSON bytes from get_state(), got {type(state).__name__}."
        )
    try:
        data = json.loads(state)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"DataLoader state is not valid JSON ({error}).") from None
    if not isinstance(data, dict):
        raise ValueError(f"DataLoader state must be a JSON object, got {type(data).__name__}.")
    return data
