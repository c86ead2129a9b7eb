"""The saved form of an elastic host's state, and taking it up under another host count.

A host saves the states of the logical shards it runs, each in the dict form
of its own shard pipeline, with the global step:

    {"elastic": 1, "global_batch_size": G, "num_logical_shards": L,
     "step": k, "stopped": false, "shards": {"0": {...}, "1": {...}}}

A restart with another number of hosts gathers the files of every process
that saved (`merge`) and each host takes the shards it now runs (`decode`).
A logical shard missing from every file, or found in two, is an error naming
the files; so are files of different steps or layouts. Nothing restarts silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from grainfn._src.core.state import describe_value, is_saved_count
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.core.stream import Stream
from grainfn._src.elastic.stream import ElasticState, ElasticStream
from grainfn._src.shards.logical import executes_leaves

ELASTIC_VERSION = 1
"""The version of the elastic state form; `decode` reads only this one."""

_LAYOUT_KEYS = ("global_batch_size", "num_logical_shards")


class ElasticCodec:
    """Encodes a host's `ElasticState`, and decodes the shards it runs from a merged state.

    Examples:
        >>> from grainfn import fn
        >>> from grainfn._src.elastic.stream import elastic_batches
        >>> stream = elastic_batches(4, fn.range(8), num_logical_shards=2, host=1, num_hosts=2)
        >>> saved = ElasticCodec(stream).encode(stream.init())
        >>> saved["step"], list(saved["shards"])
        (0, ['1'])
    """

    def __init__(self, stream: Stream[Any]) -> None:
        batches = cast(Any, stream).parent if executes_leaves(stream) else stream
        if not isinstance(batches, ElasticStream):  # workers are no part of a state
            raise TypeError(f"ElasticCodec takes an elastic host stream, got {stream!r}.")
        self.layout = batches.layout
        self.codecs = {s: StateCodec(c) for s, c in zip(batches.layout.shards, batches.components)}

    def encode(self, state: ElasticState) -> dict[str, Any]:
        """The saved form of this host's state."""
        shards = zip(self.codecs.items(), state.components)
        return {
            "elastic": ELASTIC_VERSION,
            "global_batch_size": self.layout.global_batch_size,
            "num_logical_shards": self.layout.num_logical_shards,
            "step": state.step,
            "stopped": state.stopped,
            "shards": {str(s): codec.encode(sub) for (s, codec), sub in shards},
        }

    def decode(self, data: Any) -> ElasticState:
        """This host's state from a saved form holding (at least) the shards it runs.

        Raises:
            ValueError: if the form is not an elastic state, was saved with
                another global batch size or number of logical shards, lacks
                one of this host's shards, or a shard's state belongs to
                another pipeline.
        """
        check_form(data, "The state")
        for key in _LAYOUT_KEYS:
            if data[key] != getattr(self.layout, key):
                raise ValueError(
                    f"The state was saved with {key}={data[key]}, this iterator has "
                    f"{key}={getattr(self.layout, key)}. The data depends on both: restore with "
                    "the values it was saved with."
                )
        shards = data["shards"]
        missing = [s for s in self.codecs if str(s) not in shards]
        if missing:
            raise ValueError(
                f"The state holds logical shards {_numbers(shards)}, but this host runs "
                f"{_numbers(self.codecs)}: {_numbers(missing)} missing. Restore from the files "
                "of every process that saved (grainfn.checkpoint.CheckpointRestore does)."
            )
        components = []
        for shard, codec in self.codecs.items():
            try:
                components.append(codec.decode(shards[str(shard)]))
            except ValueError as error:
                raise ValueError(f"Logical shard {shard}: {error}") from error
        return ElasticState(data["step"], data["stopped"], tuple(components))


def merge(saved: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """One elastic state holding every logical shard, from the files of all the processes.

    Args:
        saved: `(file, state dict)` of each process file, as written by hosts
            of one run (`process_<index>-of-<count>.json`).

    Raises:
        ValueError: naming the files, if one is not an elastic state, they
            differ in layout or step, two hold the same logical shard, or a
            logical shard is in none (naming the file that should hold it).

    Examples:
        >>> a = {"elastic": 1, "global_batch_size": 4, "num_logical_shards": 2, "step": 3,
        ...      "stopped": False, "shards": {"0": "s0"}}
        >>> b = dict(a, shards={"1": "s1"})
        >>> merge([("process_0-of-2.json", a), ("process_1-of-2.json", b)])["shards"]
        {'0': 's0', '1': 's1'}
        >>> merge([("process_0-of-2.json", a)])
        Traceback (most recent call last):
        ...
        ValueError: Logical shard 1 of 2 is in no state file: it was process_1-of-2.json's to \
save, and that file is not in the checkpoint. Restore a checkpoint that every process \
finished saving.
    """
    if not saved:
        raise ValueError(
            "No state file to restore an elastic iterator from: the checkpoint holds none. "
            "Restore a checkpoint that the processes finished saving."
        )
    first_file, first = saved[0]
    check_form(first, f"State file {first_file}")
    shards: dict[str, Any] = {}
    owner: dict[str, Any] = {}
    for file, data in saved:
        check_form(data, f"State file {file}")
        for key in (*_LAYOUT_KEYS, "step"):
            if data[key] != first[key]:
                raise ValueError(
                    f"State files {first_file} and {file} disagree on {key} ({first[key]} and "
                    f"{data[key]}): they are not one checkpoint. Restore a checkpoint directory "
                    "written by one run at one step."
                )
        for shard, state in data["shards"].items():
            if shard in shards:
                raise ValueError(
                    f"Logical shard {shard} is in two state files, {owner[shard]} and {file}: "
                    "two processes saved it, so the checkpoint was written by a run whose "
                    "processes did not agree on their indices. Check jax.process_index() and "
                    "ShardOptions, and restore an earlier checkpoint."
                )
            shards[shard], owner[shard] = state, file
    count = first["num_logical_shards"]
    for shard in range(count):
        if str(shard) not in shards:
            raise ValueError(_missing_shard(shard, count, [f for f, _ in saved]))
    return dict(first, stopped=any(d["stopped"] for _, d in saved), shards=shards)


def check_form(data: Any, what: str) -> None:
    """Raises ValueError unless `data` is an elastic state of this version."""
    if not isinstance(data, dict) or "elastic" not in data:
        keys = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise ValueError(
            f"{what} is not the state of an elastic iterator (keys {keys}). Restore it into "
            "the iterator that saved it."
        )
    if data["elastic"] != ELASTIC_VERSION:
        raise ValueError(
            f"{what} has elastic state version {describe_value(data['elastic'])}; this "
            "grainfn reads "
            f"version {ELASTIC_VERSION}."
        )
    for key in (*_LAYOUT_KEYS, "step", "stopped", "shards"):
        if key not in data:
            raise ValueError(f"{what} is truncated: key {key!r} is missing.")
    for key, least in (("global_batch_size", 1), ("num_logical_shards", 1), ("step", 0)):
        value = data[key]
        if not is_saved_count(value, least):
            raise ValueError(
                f"{what} holds {key}={describe_value(value)}; it must be an integer >= {least}."
            )
    if not isinstance(data["stopped"], bool):  # "no" or 0.5 would read as a stop
        raise ValueError(
            f"{what} holds stopped={describe_value(data['stopped'])}; it must be true or false."
        )
    shards = data["shards"]
    count = data["num_logical_shards"]
    if not isinstance(shards, dict) or not all(_is_shard(key, count) for key in shards):
        raise ValueError(
            f"{what} holds shards={describe_value(shards)}; it must map logical shard numbers "
            f'("0" to "{count - 1}") to the states of those shards.'
        )


def _is_shard(key: Any, count: int) -> bool:
    return isinstance(key, str) and key.isdecimal() and str(int(key)) == key and int(key) < count


def _missing_shard(shard: int, count: int, files: list[Any]) -> str:
    names = [getattr(f, "name", str(f)) for f in files]
    counts = {int(n.split("-of-")[1].split(".")[0]) for n in names if "-of-" in n}
    hosts = counts.pop() if len(counts) == 1 else 0
    if hosts and count % hosts == 0:
        owner = f"process_{shard // (count // hosts)}-of-{hosts}.json"
        found = "holds other shards" if owner in names else "is not in the checkpoint"
        return (
            f"Logical shard {shard} of {count} is in no state file: it was {owner}'s to "
            f"save, and that file {found}. Restore a checkpoint that every process finished "
            "saving."
        )
    return (
        f"Logical shard {shard} of {count} is in none of the state files {', '.join(names)}. "
        "Restore a checkpoint that every process finished saving."
    )


def _numbers(shards: Any) -> str:
    return ", ".join(str(s) for s in sorted(int(s) for s in shards)) or "none"
