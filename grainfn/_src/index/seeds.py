"""Seed derivation: how `seed(ds, s)` hands each random stage its own seed.

A random stage without an explicit seed walks up the pipeline breadth first
from itself. Every `seed` stage it meets contributes `(seed, distance)` and ends
that branch. The collected numbers feed a `numpy.random.SeedSequence`, whose
first uint32 is the stage's seed. Two random stages at different distances from
the same `seed` stage thus get different seeds, and the rule matches Grain's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

import numpy as np

SEED_LIMIT = 2**32
"""Seeds are uint32: an op seed, given or derived, and the seeds of each epoch lie below 2**32."""


class SeedNode(Protocol):
    """What seed derivation needs to know of a pipeline stage."""

    @property
    def parents(self) -> Sequence[SeedNode]:
        """The stages this one reads from."""
        ...

    @property
    def pipeline_seed(self) -> int | None:
        """The seed set by a `seed` stage, None for every other stage."""
        ...


def derive_seed(parents: Sequence[SeedNode]) -> int | None:
    """Seed for a new random stage reading from `parents`, or None if unseeded.

    Examples:
        >>> from types import SimpleNamespace as Node
        >>> source = Node(parents=(), pipeline_seed=None)
        >>> seeded = Node(parents=(source,), pipeline_seed=42)
        >>> derive_seed([seeded]) == derive_seed([Node(parents=(seeded,), pipeline_seed=None)])
        False
        >>> derive_seed([source]) is None
        True
    """
    collected: list[int] = []
    to_visit = deque((parent, 1) for parent in parents)
    while to_visit:
        node, depth = to_visit.popleft()
        if node.pipeline_seed is not None:
            collected.extend((node.pipeline_seed, depth))
        else:
            to_visit.extend((parent, depth + 1) for parent in node.parents)
    if not collected:
        return None
    return int(np.random.SeedSequence(collected).generate_state(1, dtype=np.uint32)[0])
