"""How a DataLoader's stage follows the records that Grain's DataLoader counts: a declaration.

Grain's DataLoader state counts the records of a shard taken (or, in Grain's
worker order, each worker's share of them). grainfn's DataLoader is a
pipeline over those records, and each stage it is made of declares, as its
class attribute `loader_records`, how its positions follow from them. The
one walk of `grainfn._src.grain_states.loaders` reads a loader's position
from these declarations alone, from the records up or from the top down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def _same(stage: Any, position: int) -> int:
    return position


@dataclasses.dataclass(frozen=True)
class LoaderRecords:
    """How a DataLoader's stage passes the records Grain counts on to the stage above.

    Attributes:
        any_workers: Whether Grain's order through the stage is grainfn's with
            any number of Grain workers (a map: one element per record). A
            filter or a batch runs in each Grain worker over its own records,
            so Grain's order through it is grainfn's with one worker or none.
        position_after: `position_after(stage, taken)`: the stage's position
            once its parent's first `taken` positions are read (the same, but
            for a batch); it raises ValueError where no position ends there.
        parent_position: `parent_position(stage, position)`: its parent's
            positions read up to its `position` (`position_after`'s inverse).
        records: Whether its positions are the shard's records themselves
            (a sampler's): the walk ends there.
        share: Whether its positions are a Grain worker's share of the records
            directly beneath it (a slice of them): the walk ends there too.

    Examples:
        >>> ONE_TO_ONE.position_after(None, 3), ONE_TO_ONE.passes
        (3, True)
        >>> SHARD_RECORDS.passes
        False
    """

    any_workers: bool = True
    position_after: Callable[[Any, int], int] = _same
    parent_position: Callable[[Any, int], int] = _same
    records: bool = False
    share: bool = False

    @property
    def passes(self) -> bool:
        """Whether the walk goes on through the stage to its parent."""
        return not (self.records or self.share)


ONE_TO_ONE = LoaderRecords()
"""A stage whose positions are its parent's, in any worker's order too (a map)."""

IN_EACH_WORKER = LoaderRecords(any_workers=False)
"""A stage whose positions (or states) are its parent's, and that each Grain worker runs
over its own records (a filter; a stream batch, whose state is its parent's)."""

SHARD_RECORDS = LoaderRecords(records=True)
"""The shard's records, as the sampler gives them."""

WORKER_SHARE = LoaderRecords(share=True)
"""A Grain worker's share of the shard's records, where it is a slice directly over them."""
