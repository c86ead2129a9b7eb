"""How a stage's state record reads as Grain's state of the same stage: a declaration.

A stage whose Grain state is its own counters over its parent's state
declares it in its module, as its class attribute `grain_keys`: Grain's name
of the stage, its record, and which Grain key holds which field. The
translators of `grainfn._src.grain_states` read Grain's state into the record
and write the record back from this alone, for every stage alike; only the
few stages whose Grain state is not counters over a parent (mix, zip,
interleave, a user's iterator, concat-then-split) have readers of their own
there.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class GrainKeys:
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
