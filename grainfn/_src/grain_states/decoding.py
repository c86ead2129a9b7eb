"""One place that tells a saved state's format: grainfn's own dict, or Grain's."""

from __future__ import annotations

from typing import Any

from grainfn._src.core.state_codec import StateCodec


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
