"""How Grain's `get_next_index` and `set_next_index` cross a stage: a declaration a stage makes.

A stage class names its rule in its class attribute `next_index_rule`, a
member of `NextIndexRule`, or None where its position is not one index;
`grainfn._src.grain_states.next_index.RULES` holds what each rule does. A
rule is a member, never a string: a misspelt rule fails when its class is
made (`grainfn._src.core.declarations`), not later as "unsupported".
"""

from __future__ import annotations

import enum


class NextIndexRule(enum.Enum):
    """The rules by which the next index of a pipeline crosses a stage.

    Attributes:
        PARENT: The stage's state is its parent's, and so is its index (map, seed).
        COUNTER: The stage counts what it passed on over its parent's state
            (limit, random_map, map_with_index).
        BATCH: The stage groups its parent's elements: its index counts batches begun.
        INTERLEAVE: The index of an interleave's one dataset, as in Grain.

    Examples:
        >>> NextIndexRule("counter")
        <NextIndexRule.COUNTER: 'counter'>
    """

    PARENT = "parent"
    COUNTER = "counter"
    BATCH = "batch"
    INTERLEAVE = "interleave"
