"""How a stage's state record reads as Grain's state of the same stage, and back: a declaration.

A stage that Grain has as well declares, in its module, how Grain's state of
it reads into its record and is written from it: its class attribute
`grain_state`. The one walker of `grainfn._src.grain_states.streams` reads
and writes a whole pipeline's Grain state from these declarations alone,
handing each the stages beneath it to read or write (`Beneath`):

- `GrainKeys`: Grain's state is the stage's counters under Grain's keys, over
  its parent's state (limit, repeat, random_map and the rest);
- `OwnGrainState`: a reader and a writer of the stage's own, for a Grain state
  that is not counters over one parent (mix, zip, interleave, a user's
  iterator, concat-then-split), and `PARENTS`, for a stage whose Grain state is
  its parent's (map, filter, batch, seed, the prefetch and option stages).

The readers check what Grain wrote with `read_field`, `read_count` and `read_flag` here, so
that every stage names a missing key or a bad value alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core import state as records

Beneath = Callable[[Any, Any, str], Any]
"""How the walker reads (or writes) a stage beneath: `beneath(stream, state, path)`."""

Reader = Callable[[Any, Any, str, Beneath], Any]
"""`reader(stream, grains, path, beneath)`: the stage's record at Grain's state `grains`."""

Writer = Callable[[Any, Any, str, Beneath], Any]
"""`writer(stream, record, path, beneath)`: Grain's state of the stage at its `record`."""


class CannotWriteError(Exception):
    """Raised by a writer where grainfn's record does not determine Grain's state; says why."""


class GrainState:
    """What the walker reads of a stage's declaration (see the module doc).

    Attributes:
        stage: Grain's name of the stage, as messages and docs give it; None
            for a stage whose Grain state is its parent's.
        writes: Whether grainfn writes Grain's state of the stage (else: read only).
        grains_prefetch: Whether Grain's `mp_prefetch` over this stage writes
            this stage's state as its own (Grain's worker order).
    """

    stage: str | None
    writes: bool = True
    grains_prefetch: bool = False

    def read(self, stream: Any, grains: Any, path: str, beneath: Beneath) -> Any:
        """The record of `stream` at the position Grain's state `grains` (at `path`) names."""
        raise NotImplementedError

    def write(self, stream: Any, record: Any, path: str, beneath: Beneath) -> Any:
        """Grain's state of `stream` at its `record` (CannotWriteError: grainfn cannot tell it)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class GrainKeys(GrainState):
    """A stage's record as Grain's state dict: its counters' keys and its parent's.

    Attributes:
        stage: Grain's name of the stage, as messages and docs give it.
        record: The stage's state record, built by keyword from the fields.
        counters: Pairs `(Grain's key, the record's field)`, each an integer >= 0.
        parent: Grain's key of the parent's state (the record's field `parent`),
            or None for a stage that reads its files itself.

    Examples:
        >>> from typing import NamedTuple
        >>> class Taken(NamedTuple):
        ...     taken: int
        ...     parent: object
        >>> keys = GrainKeys("LimitIterDataset", Taken, (("count_elements_read", "taken"),))
        >>> keys.build({"taken": 3, "parent": None})
        Taken(taken=3, parent=None)
        >>> keys.names()
        ('parent', 'count_elements_read')
    """

    stage: str
    record: type[Any]
    counters: tuple[tuple[str, str], ...]
    parent: str | None = "parent"

    def build(self, fields: dict[str, Any]) -> Any:
        """The record of these fields (the parent's under `parent`)."""
        return self.record(**fields)

    def names(self) -> tuple[str, ...]:
        """Grain's keys of the stage's state, the parent's first."""
        parent = () if self.parent is None else (self.parent,)
        return (*parent, *(key for key, _ in self.counters))

    def read(self, stream: Any, grains: Any, path: str, beneath: Beneath) -> Any:
        """The record of the counters and the parent's; the stage's `grain_record` of it."""
        fields = {name: read_count(grains, key, path) for key, name in self.counters}
        if self.parent is not None:
            parent = read_field(grains, self.parent, path)
            fields["parent"] = beneath(stream.parent, parent, f"{path}.{self.parent}")
        return stream.grain_record(self.build(fields), path)

    def write(self, stream: Any, record: Any, path: str, beneath: Beneath) -> Any:
        written = {}
        if self.parent is not None:
            (parent,) = stream.parents
            written[self.parent] = beneath(parent, record.parent, f"{path}.{self.parent}")
        return written | {key: getattr(record, name) for key, name in self.counters}


@dataclasses.dataclass(frozen=True)
class OwnGrainState(GrainState):
    """A stage's own reader and writer of Grain's state, in its module.

    Attributes:
        stage: Grain's name of the stage (None: its Grain state is its parent's).
        reader: Reads Grain's state of the stage into its record (see `Reader`).
        writer: Writes it back (see `Writer`); None where grainfn's record does
            not determine Grain's state (read only).
        grains_prefetch: Whether Grain's `mp_prefetch` over this stage writes
            this stage's state as its own (Grain's worker order).
    """

    stage: str | None
    reader: Reader
    writer: Writer | None = None
    grains_prefetch: bool = False

    @property
    def writes(self) -> bool:  # type: ignore[override]
        return self.writer is not None

    def read(self, stream: Any, grains: Any, path: str, beneath: Beneath) -> Any:
        return self.reader(stream, grains, path, beneath)

    def write(self, stream: Any, record: Any, path: str, beneath: Beneath) -> Any:
        if self.writer is None:
            raise CannotWriteError("its grainfn state does not determine Grain's")
        return self.writer(stream, record, path, beneath)


def _parents(stream: Any, state: Any, path: str, beneath: Beneath) -> Any:
    (parent,) = stream.parents
    return beneath(parent, state, path)


PARENTS = OwnGrainState(None, _parents, _parents)
"""The declaration of a stage whose Grain state (and record) is its parent's."""


def read_field(grains: Any, key: str, path: str) -> Any:
    """Grain's `grains[key]`, or a ValueError naming the key and what `grains` is."""
    if not isinstance(grains, dict) or key not in grains:
        raise ValueError(
            f"Grain's {path} should hold {key!r} for this pipeline, "
            f"got {records.describe_value(grains)}: it is the "
            "state of another pipeline."
        )
    return grains[key]


def read_count(grains: Any, key: str, path: str) -> int:
    """Grain's `grains[key]`, checked to be an integer >= 0."""
    return check_count(read_field(grains, key, path), f"{path}.{key}")


def check_count(value: Any, where: str) -> int:
    """`value`, checked to be an integer >= 0 (`where` names it for the error)."""
    if not records.is_saved_count(value):
        raise ValueError(
            f"Grain's {where} must be an integer >= 0, got {records.describe_value(value)}."
        )
    return value


def read_flag(grains: Any, key: str, path: str) -> bool:
    """Grain's `grains[key]`, checked to be a flag."""
    return check_flag(read_field(grains, key, path), f"{path}.{key}")


def check_flag(value: Any, where: str) -> bool:
    """`value` as a flag: a bool, or 0 or 1 (Grain writes interleave's `exhausted` so)."""
    # "false", 0.5 or -7 would otherwise read as a flag, and a flag that is set ends the data.
    if type(value) not in (bool, int) or value not in (0, 1):
        raise ValueError(
            f"Grain's {where} must be true or false (or 1 or 0), got "
            f"{records.describe_value(value)}."
        )
    return bool(value)


def read_components(
    streams: Sequence[Any], grains: Any, path: str, beneath: Beneath
) -> tuple[Any, ...]:
    """The records of `streams` from Grain's list of their states, `grains` (at `path`.parents)."""
    if not isinstance(grains, list) or len(grains) != len(streams):
        raise ValueError(
            f"Grain's {path}.parents must list {len(streams)} component states, "
            f"got {records.describe_value(grains)}."
        )
    return tuple(
        beneath(c, s, f"{path}.parents[{i}]") for i, (c, s) in enumerate(zip(streams, grains))
    )


def write_components(
    streams: Sequence[Any], states: Sequence[Any], path: str, beneath: Beneath
) -> list[Any]:
    """Grain's list of the states of `streams` at their records `states`."""
    return [beneath(c, s, f"{path}.parents[{i}]") for i, (c, s) in enumerate(zip(streams, states))]
