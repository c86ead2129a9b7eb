"""An iterator's state as a pytree of numpy integers, to checkpoint beside model parameters.

A grainfn state keeps one shape for an iterator's whole life: the same nest of
records, only the integers (positions, counters, epochs) and bools change. So
the state fits in two int64 arrays, a pytree any JAX or Orbax tool can carry:

- `"state"`: the integer and bool leaves of the state dict's `"state"`, in a
  fixed order (dict keys sorted, lists in order), bools as 0 and 1;
- `"fingerprint"`: a 64-bit hash of everything else, which restoring needs
  to match: the state version, the pipeline description, the layout of the
  leaves, and the loader's settings (`"sampler"`, `"data_source"`, ...) except
  those that do not change the elements (`FREE_FIELDS`).

Restoring takes the iterator's current `get_state()` as the template, puts
the leaves back in it and calls `set_state`: a tree saved from another
pipeline, or by another grainfn state version, is refused instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from grainfn._src.checkpoint.files import StatefulIterator
from grainfn._src.core.state import describe_value
from grainfn._src.core.state_codec import StateCodec, state_to_dict
from grainfn._src.core.stream import Stream
from grainfn._src.core.validate import INT64_MAX

STATE, FINGERPRINT = "state", "fingerprint"
"""The keys of a state tree."""

FREE_FIELDS = frozenset({"worker_count"})
"""Loader fields left out of the fingerprint: a state restores with any number of workers."""


def state_tree(iterator: StatefulIterator) -> dict[str, np.ndarray]:
    """The iterator's current state as `{"fingerprint": int64[], "state": int64[n]}`.

    Works for iterators whose `get_state()` returns a dict (`DatasetIterator`)
    or JSON bytes (`DataLoader` iterators). `n` is the same for the
    iterator's whole life, so the tree can sit in a model's pytree and be
    saved with `ocp.args.StandardSave`.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset().batch(3))
        >>> _ = next(it)
        >>> tree = state_tree(it)
        >>> tree["state"], tree["state"].dtype, tree["fingerprint"].shape
        (array([3]), dtype('int64'), ())
        >>> _ = next(it)
        >>> set_state_tree(it, tree)
        >>> next(it)
        array([3, 4, 5])
    """
    return tree_of(_state_dict(iterator.get_state(), "state_tree"))


def set_state_tree(iterator: StatefulIterator, tree: Mapping[str, Any]) -> None:
    """Sets the iterator to the state of a tree that `state_tree` made for this pipeline.

    The tree's arrays may be numpy or JAX arrays (as Orbax restores them).

    Raises:
        ValueError: if the tree is not a state tree, or was made for another
            pipeline, state version or loader configuration (its fingerprint
            or its number of integers differs).
    """
    template = iterator.get_state()
    state = state_dict_from_tree(_state_dict(template, "set_state_tree"), tree)
    if isinstance(template, (bytes, bytearray)):
        iterator.set_state(json.dumps(state).encode("utf-8"))
    else:
        iterator.set_state(state)


def stream_state_tree(stream: Stream[Any], state: Any) -> dict[str, np.ndarray]:
    """The core form of `state_tree`: the tree of a state record of `stream`.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.batch(2, fn.from_dataset(fn.range(5)))
        >>> it = fn.iterate(stream)
        >>> _ = next(it)
        >>> tree = stream_state_tree(stream, it.state)
        >>> tree["state"]
        array([2])
        >>> stream_state_from_tree(stream, tree)
        DatasetPosition(position=2)
    """
    return tree_of(state_to_dict(stream, state))


def stream_state_from_tree(stream: Stream[Any], tree: Mapping[str, Any]) -> Any:
    """The state record of `stream` that `stream_state_tree` turned into `tree`.

    Raises:
        ValueError: as `set_state_tree`.
    """
    codec = StateCodec(stream)
    return codec.decode(state_dict_from_tree(codec.encode(stream.init()), tree))


def tree_of(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The tree of a state dict (`get_state()`'s form): its leaves and its fingerprint."""
    leaves: list[int] = []
    layout = _flatten(state[STATE], STATE, leaves)
    return {
        FINGERPRINT: np.array(_fingerprint(state, layout), dtype=np.int64),
        STATE: np.array(leaves, dtype=np.int64),
    }


def state_dict_from_tree(template: Mapping[str, Any], tree: Mapping[str, Any]) -> dict[str, Any]:
    """`template` (a state dict of the right pipeline) with the leaves of `tree` put back.

    Raises:
        ValueError: if `tree` is not a state tree or does not fit `template`.
    """
    leaves, fingerprint = _arrays(tree)
    expected = tree_of(template)
    if leaves.shape != expected[STATE].shape:
        raise ValueError(
            f"The state tree holds {leaves.size} integers but this iterator's state has "
            f"{expected[STATE].size}: the tree was saved from another pipeline. Restore it "
            "into an iterator built by the same pipeline code."
        )
    if fingerprint != int(expected[FINGERPRINT]):
        raise ValueError(
            f"The state tree's fingerprint {fingerprint} is not this iterator's "
            f"{int(expected[FINGERPRINT])}: the tree was saved from another pipeline, "
            "state version or loader configuration (the fingerprint covers the pipeline "
            "description, the state version and layout and the loader's settings). Restore it "
            "into an iterator built by the same code; compare get_state()['pipeline'] of both."
        )
    values = iter(leaves.tolist())
    state = dict(template)
    state[STATE] = _rebuild(template[STATE], STATE, values)
    return state


def _state_dict(state: Any, what: str) -> Mapping[str, Any]:
    if isinstance(state, (bytes, bytearray)):
        state = json.loads(bytes(state).decode("utf-8"))
    if not isinstance(state, Mapping) or not {"version", "pipeline", STATE} <= set(state):
        raise ValueError(
            f"{what} needs a grainfn iterator, whose get_state() is a dict with 'version', "
            f"'pipeline' and 'state' (or its JSON bytes); got {describe_value(state)}."
        )
    return state


def _flatten(value: Any, path: str, leaves: list[int]) -> Any:
    """Appends the int and bool leaves of `value` to `leaves`; returns the layout around them."""
    if isinstance(value, bool):
        leaves.append(int(value))
        return "#bool"
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise ValueError(f"State field {path} = {value} does not fit in an int64 leaf.")
        leaves.append(value)
        return "#int"
    if isinstance(value, str):
        return "=" + value
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {key: _flatten(value[key], f"{path}.{key}", leaves) for key in sorted(value)}
    if isinstance(value, list):
        return [_flatten(item, f"{path}[{i}]", leaves) for i, item in enumerate(value)]
    raise ValueError(
        f"A state tree holds integers and bools; the state field {path} is {describe_value(value)}."
    )


def _rebuild(template: Any, path: str, values: Iterator[int]) -> Any:
    """`template` with its int and bool leaves replaced, in `_flatten`'s order, from `values`."""
    if isinstance(template, bool):
        value = next(values)
        if value not in (0, 1):
            raise ValueError(f"State tree leaf {path} is a bool, so 0 or 1, but holds {value}.")
        return bool(value)
    if isinstance(template, int):
        return next(values)
    if isinstance(template, Mapping):
        parts = {key: _rebuild(template[key], f"{path}.{key}", values) for key in sorted(template)}
        return {key: parts[key] for key in template}
    if isinstance(template, list):
        return [_rebuild(item, f"{path}[{i}]", values) for i, item in enumerate(template)]
    return template


def _fingerprint(state: Mapping[str, Any], layout: Any) -> int:
    fixed = {key: value for key, value in state.items() if key != STATE and key not in FREE_FIELDS}
    text = json.dumps({"fixed": fixed, "layout": layout}, sort_keys=True)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _arrays(tree: Any) -> tuple[np.ndarray, int]:
    if not isinstance(tree, Mapping) or set(tree) != {STATE, FINGERPRINT}:
        keys = sorted(map(str, tree)) if isinstance(tree, Mapping) else None
        raise ValueError(
            "A state tree is the dict {'fingerprint': ..., 'state': ...} that state_tree "
            f"returns; got {describe_value(tree) if keys is None else f'keys {keys}'}."
        )
    leaves, fingerprint = np.asarray(tree[STATE]), np.asarray(tree[FINGERPRINT])
    for name, array, ndim in ((STATE, leaves, 1), (FINGERPRINT, fingerprint, 0)):
        if array.ndim != ndim or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"State tree entry {name!r} must be a {ndim}-d integer array, got "
                f"{array.dtype} of shape {array.shape}."
            )
        if array.dtype.itemsize < 8:
            raise ValueError(
                f"State tree entry {name!r} is {array.dtype}, not int64: its values were "
                "truncated (JAX without jax_enable_x64 makes int32 arrays). Keep the state "
                "tree as numpy arrays, or enable jax_enable_x64."
            )
    return leaves, int(fingerprint)
